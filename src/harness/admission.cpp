#include "harness/admission.hpp"

#include <boost/asio/this_coro.hpp>

#include <algorithm>

namespace harnessd::harness {
namespace asio = boost::asio;

Admission::Admission(std::size_t max_running, std::size_t max_queued)
    : max_running_(std::max<std::size_t>(1, max_running)), max_queued_(max_queued) {}

asio::awaitable<Admission::Result> Admission::acquire(llm::CancelScope& cancel, bool ahead) {
  {
    std::lock_guard lock(mutex_);
    if (running_ < max_running_ && waiters_.empty() && ahead_.empty()) {
      ++running_;
      co_return Result::admitted;
    }
    if (waiters_.size() + ahead_.size() >= max_queued_) co_return Result::overloaded;
  }
  // Only a prompt that has to wait pays for a waiter and its timer.
  auto waiter = std::make_shared<Waiter>();
  waiter->wakeup = util::Wakeup::create(co_await asio::this_coro::executor);
  {
    // Re-checked: the lock was not held across the co_await above.
    std::lock_guard lock(mutex_);
    if (running_ < max_running_ && waiters_.empty() && ahead_.empty()) {
      ++running_;
      co_return Result::admitted;
    }
    if (waiters_.size() + ahead_.size() >= max_queued_) co_return Result::overloaded;
    (ahead ? ahead_ : waiters_).push_back(waiter);
  }
  llm::CancelScope::Hook hook(cancel, [waiter] { waiter->wakeup->notify(); });
  for (;;) {
    if (cancel.cancelled()) {
      std::unique_lock lock(mutex_);
      if (waiter->granted) {
        lock.unlock();
        release();  // handed a slot just as the cancel came: pass it on
      } else {
        auto& line = ahead ? ahead_ : waiters_;
        line.erase(std::find(line.begin(), line.end(), waiter));
      }
      co_return Result::cancelled;
    }
    {
      std::lock_guard lock(mutex_);
      if (waiter->granted) co_return Result::admitted;
    }
    co_await waiter->wakeup->wait();
  }
}

void Admission::release() {
  std::lock_guard lock(mutex_);
  if (waiters_.empty() && ahead_.empty()) {
    --running_;
    return;
  }
  // The slot moves to the next waiter (running_ stays as it is): ahead
  // first, but never twice in a row while the other line waits.
  const bool from_ahead = !ahead_.empty() && (waiters_.empty() || !last_went_ahead_);
  auto& line = from_ahead ? ahead_ : waiters_;
  last_went_ahead_ = from_ahead;
  std::shared_ptr<Waiter> next = std::move(line.front());
  line.pop_front();
  next->granted = true;
  next->wakeup->notify();
}

std::size_t Admission::running() const {
  std::lock_guard lock(mutex_);
  return running_;
}

std::size_t Admission::queued() const {
  std::lock_guard lock(mutex_);
  return waiters_.size() + ahead_.size();
}

}  // namespace harnessd::harness
