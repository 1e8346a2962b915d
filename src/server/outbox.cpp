#include "server/outbox.hpp"

#include <boost/asio/this_coro.hpp>

#include <utility>

namespace harnessd::server {
namespace asio = boost::asio;

Outbox::Outbox(asio::any_io_executor writer_executor, std::size_t max_bytes)
    : max_bytes_(max_bytes), writer_wakeup_(util::Wakeup::create(std::move(writer_executor))) {}

asio::awaitable<bool> Outbox::wait_for_space(std::unique_lock<std::mutex>& lock) {
  std::shared_ptr<util::Wakeup> waiter;
  for (;;) {
    lock.lock();
    if (closed_) {
      lock.unlock();
      co_return false;
    }
    // An empty queue always accepts, so one frame larger than the bound
    // still goes through.
    if (bytes_ < max_bytes_ || frames_.empty()) co_return true;
    if (waiter) space_waiters_.push_back(waiter);
    lock.unlock();
    if (!waiter) {
      // Created lazily: only a blocked pusher pays for a timer. The check
      // above runs again, since the lock was not held across this co_await.
      waiter = util::Wakeup::create(co_await asio::this_coro::executor);
      continue;
    }
    co_await waiter->wait();
  }
}

asio::awaitable<bool> Outbox::push(std::string frame, std::size_t frames) {
  std::unique_lock lock(mutex_, std::defer_lock);
  if (!co_await wait_for_space(lock)) co_return false;
  bytes_ += frame.size();
  frame_count_ += frames;
  frames_.push_back(std::move(frame));
  if (writer_waiting_) {
    writer_waiting_ = false;
    writer_wakeup_->notify();
  }
  co_return true;
}

asio::awaitable<bool> Outbox::take(std::vector<std::string>& batch) {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (!frames_.empty()) {
        if (batch.empty()) {
          batch.swap(frames_);  // hands over the whole queue without copying
        } else {
          for (std::string& frame : frames_) batch.push_back(std::move(frame));
          frames_.clear();
        }
        bytes_ = 0;
        frames_taken_ += std::exchange(frame_count_, 0);
        for (auto& waiter : space_waiters_) waiter->notify();
        space_waiters_.clear();
        co_return true;
      }
      if (closed_) co_return false;
      writer_waiting_ = true;
    }
    co_await writer_wakeup_->wait();
  }
}

void Outbox::wake_all_locked() {
  writer_waiting_ = false;
  writer_wakeup_->notify();
  for (auto& waiter : space_waiters_) waiter->notify();
  space_waiters_.clear();
}

void Outbox::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  wake_all_locked();
}

void Outbox::abort() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  frames_.clear();
  bytes_ = 0;
  frame_count_ = 0;
  wake_all_locked();
}

std::size_t Outbox::queued_bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace harnessd::server
