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

asio::awaitable<bool> Outbox::push(Block block, std::size_t frames) {
  std::unique_lock lock(mutex_, std::defer_lock);
  if (!co_await wait_for_space(lock)) co_return false;
  pushed_since_take_ = true;
  queue_locked(std::move(block), frames);
  co_return true;
}

asio::awaitable<bool> Outbox::push(std::string frame, std::size_t frames) {
  Block block = std::make_shared<const std::string>(std::move(frame));
  const bool queued = co_await push(std::move(block), frames);
  co_return queued;
}

Outbox::Offer Outbox::offer(Block block, std::size_t frames, std::size_t limit) {
  std::lock_guard lock(mutex_);
  if (closed_) return Offer::refused;
  if (bytes_ >= limit && !frames_.empty()) {
    overflowed_ = true;
    abort_locked();
    return Offer::overflowed;
  }
  queue_locked(std::move(block), frames);
  return Offer::queued;
}

Outbox::Offer Outbox::overflow() {
  std::lock_guard lock(mutex_);
  if (closed_) return Offer::refused;
  overflowed_ = true;
  abort_locked();
  return Offer::overflowed;
}

void Outbox::queue_locked(Block block, std::size_t frames) {
  bytes_ += block->size();
  frame_count_ += frames;
  frames_.push_back(std::move(block));
  if (writer_waiting_) {
    writer_waiting_ = false;
    writer_wakeup_->notify();
  }
}

asio::awaitable<bool> Outbox::take(std::vector<Block>& batch) {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (!frames_.empty()) {
        took_only_offers_ = !pushed_since_take_;
        move_queued_locked(batch);
        co_return true;
      }
      if (closed_) co_return false;
      writer_waiting_ = true;
    }
    co_await writer_wakeup_->wait();
  }
}

void Outbox::take_ready(std::vector<Block>& batch) {
  std::lock_guard lock(mutex_);
  if (!frames_.empty()) move_queued_locked(batch);
}

void Outbox::move_queued_locked(std::vector<Block>& batch) {
  if (batch.empty()) {
    batch.swap(frames_);  // hands over the whole queue without copying
  } else {
    for (Block& block : frames_) batch.push_back(std::move(block));
    frames_.clear();
  }
  bytes_ = 0;
  pushed_since_take_ = false;
  frames_taken_ += std::exchange(frame_count_, 0);
  for (auto& waiter : space_waiters_) waiter->notify();
  space_waiters_.clear();
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
  abort_locked();
}

void Outbox::abort_locked() {
  closed_ = true;
  frames_.clear();
  bytes_ = 0;
  frame_count_ = 0;
  wake_all_locked();
}

bool Outbox::overflowed() const {
  std::lock_guard lock(mutex_);
  return overflowed_;
}

std::size_t Outbox::queued_bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace harnessd::server
