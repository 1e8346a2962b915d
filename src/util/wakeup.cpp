#include "util/wakeup.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace harnessd::util {
namespace asio = boost::asio;

Wakeup::Wakeup(asio::any_io_executor executor)
    : timer_(std::move(executor), asio::steady_timer::time_point::max()) {}

void Wakeup::notify() {
  std::lock_guard lock(mutex_);
  if (!waiting_) {
    notified_ = true;
    return;
  }
  waiting_ = false;
  timer_.cancel();
}

/// Arms the wait under the mutex, so that a notify() on another thread
/// either finds it armed or leaves notified_ for it to see.
struct Wakeup::Arm {
  Wakeup* wakeup;
  template <class Handler>
  void operator()(Handler&& handler) const {
    std::lock_guard lock(wakeup->mutex_);
    if (wakeup->notified_) {
      wakeup->notified_ = false;
      wakeup->timer_.expires_at(asio::steady_timer::time_point::min());  // completes at once
    } else {
      wakeup->waiting_ = true;
    }
    wakeup->timer_.async_wait(std::forward<Handler>(handler));
  }
};

asio::awaitable<void> Wakeup::wait() {
  {
    std::lock_guard lock(mutex_);
    if (notified_) {
      notified_ = false;
      co_return;
    }
  }
  boost::system::error_code ignored;  // operation_aborted: the notify()
  const Arm arm{this};
  auto token = asio::redirect_error(asio::use_awaitable, ignored);
  co_await asio::async_initiate<decltype(token), void(boost::system::error_code)>(arm, token);
  std::lock_guard lock(mutex_);
  waiting_ = false;
  timer_.expires_at(asio::steady_timer::time_point::max());
}

}  // namespace harnessd::util
