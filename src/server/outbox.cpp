#include "server/outbox.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <utility>

namespace harnessd::server {
namespace asio = boost::asio;

bool ByteBudget::take(std::size_t bytes, const std::shared_ptr<util::Wakeup>& waiter) {
  std::lock_guard lock(mutex_);
  if (used_ == 0 || (bytes <= limit_ && used_ <= limit_ - bytes)) {
    used_ += bytes;
    return true;
  }
  if (waiter && std::find(waiters_.begin(), waiters_.end(), waiter) == waiters_.end()) waiters_.push_back(waiter);
  return false;
}

void ByteBudget::take_anyway(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  used_ += bytes;
}

void ByteBudget::give(std::size_t bytes) {
  std::vector<std::shared_ptr<util::Wakeup>> woken;
  {
    std::lock_guard lock(mutex_);
    used_ -= std::min(bytes, used_);
    woken.swap(waiters_);
  }
  for (const auto& waiter : woken) waiter->notify();
}

void ByteBudget::forget(const std::shared_ptr<util::Wakeup>& waiter) {
  std::lock_guard lock(mutex_);
  std::erase(waiters_, waiter);
}

std::size_t ByteBudget::used() const {
  std::lock_guard lock(mutex_);
  return used_;
}

ResponseCharge::ResponseCharge(ResponseCharge&& other) noexcept
    : connection_(std::move(other.connection_)),
      shared_(std::move(other.shared_)),
      bytes_(std::exchange(other.bytes_, 0)) {}

ResponseCharge& ResponseCharge::operator=(ResponseCharge&& other) noexcept {
  if (this != &other) {
    release();
    connection_ = std::move(other.connection_);
    shared_ = std::move(other.shared_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void ResponseCharge::release() noexcept {
  if (bytes_ == 0) return;
  if (connection_) connection_->give(bytes_);
  if (shared_) shared_->give(bytes_);
  bytes_ = 0;
}

void ResponseCharge::resize(std::size_t bytes) {
  if (bytes < bytes_) {
    if (connection_) connection_->give(bytes_ - bytes);
    if (shared_) shared_->give(bytes_ - bytes);
  } else if (bytes > bytes_) {
    if (connection_) connection_->take_anyway(bytes - bytes_);
    if (shared_) shared_->take_anyway(bytes - bytes_);
  }
  bytes_ = bytes;
}

ResponseCharge ResponseCharge::split(std::size_t bytes) {
  const std::size_t moved = std::min(bytes, bytes_);
  bytes_ -= moved;
  return ResponseCharge(connection_, shared_, moved);
}

void ResponseCharge::absorb(ResponseCharge other) {
  if (other.bytes_ == 0) return;
  if (bytes_ == 0) {
    *this = std::move(other);
    return;
  }
  bytes_ += std::exchange(other.bytes_, 0);
}

Block Outbox::charged_block(std::string frames, ResponseCharge charge) {
  struct Charged {
    std::string frames;
    ResponseCharge charge;
  };
  auto held = std::make_shared<Charged>(Charged{std::move(frames), std::move(charge)});
  return Block(held, &held->frames);  // the charge lives as long as the frames
}

Outbox::Outbox(asio::any_io_executor writer_executor, std::size_t max_bytes)
    : max_bytes_(max_bytes), writer_wakeup_(util::Wakeup::create(std::move(writer_executor))) {}

Outbox::~Outbox() = default;

void Outbox::limit_responses(std::size_t per_connection, std::shared_ptr<ByteBudget> shared,
                             std::chrono::milliseconds max_wait) {
  std::lock_guard lock(mutex_);
  response_budget_ = std::make_shared<ByteBudget>(per_connection);
  shared_response_budget_ = std::move(shared);
  response_wait_ = max_wait;
}

asio::awaitable<std::optional<ResponseCharge>> Outbox::reserve(std::size_t bytes) {
  std::optional<ResponseCharge> charge;
  std::shared_ptr<ByteBudget> mine;
  std::shared_ptr<ByteBudget> shared;
  std::chrono::milliseconds max_wait{0};
  {
    std::lock_guard lock(mutex_);
    if (closed_) co_return charge;
    mine = response_budget_;
    shared = shared_response_budget_;
    max_wait = response_wait_;
  }
  if (!mine) {
    charge.emplace();  // no budget: nothing to hold
    co_return charge;
  }
  const auto deadline = std::chrono::steady_clock::now() + max_wait;
  std::shared_ptr<util::Wakeup> waiter;  // made on the first wait only
  std::optional<asio::steady_timer> timeout;
  for (;;) {
    if (mine->take(bytes, waiter)) {
      if (!shared || shared->take(bytes, waiter)) {
        charge.emplace(mine, shared, bytes);
        break;
      }
      mine->give(bytes);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (!waiter) {
      // The takes run again with the waiter registered, so bytes given
      // back between them and the wait are not missed.
      waiter = util::Wakeup::create(co_await asio::this_coro::executor);
      timeout.emplace(co_await asio::this_coro::executor);
      timeout->expires_at(deadline);
      timeout->async_wait([waiter](boost::system::error_code) { waiter->notify(); });
      continue;
    }
    {
      // An outbox closed meanwhile (the peer went away) ends the wait too.
      std::lock_guard lock(mutex_);
      if (closed_) break;
      if (std::find(space_waiters_.begin(), space_waiters_.end(), waiter) == space_waiters_.end()) {
        space_waiters_.push_back(waiter);
      }
    }
    co_await waiter->wait();
  }
  if (waiter) {
    mine->forget(waiter);
    if (shared) shared->forget(waiter);
    timeout->cancel();
  }
  co_return charge;
}

void Outbox::charge_next_frames(ResponseCharge charge) {
  std::lock_guard lock(mutex_);
  if (closed_) return;  // nothing more is queued: the charge goes back now
  next_frames_charge_.absorb(std::move(charge));
}

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
  ResponseCharge charge;
  {
    std::lock_guard lock(mutex_);
    if (next_frames_charge_.bytes() > 0) charge = next_frames_charge_.split(frame.size());
  }
  Block block = charge.bytes() > 0 ? charged_block(std::move(frame), std::move(charge))
                                   : std::make_shared<const std::string>(std::move(frame));
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
  ResponseCharge unused;  // given back outside the lock
  std::lock_guard lock(mutex_);
  closed_ = true;
  unused = std::move(next_frames_charge_);
  wake_all_locked();
}

void Outbox::abort() {
  std::lock_guard lock(mutex_);
  abort_locked();
}

void Outbox::abort_locked() {
  closed_ = true;
  next_frames_charge_ = ResponseCharge();
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
