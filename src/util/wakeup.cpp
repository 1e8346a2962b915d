#include "util/wakeup.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace harnessd::util {
namespace asio = boost::asio;

Wakeup::Wakeup(asio::any_io_executor executor)
    : timer_(std::move(executor), asio::steady_timer::time_point::max()) {}

void Wakeup::notify() {
  asio::post(timer_.get_executor(), [self = shared_from_this()] {
    self->timer_.expires_at(asio::steady_timer::time_point::min());
  });
}

asio::awaitable<void> Wakeup::wait() {
  boost::system::error_code ignored;
  co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  timer_.expires_at(asio::steady_timer::time_point::max());
}

}  // namespace harnessd::util
