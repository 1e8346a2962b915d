// The ordered, bounded queue of outgoing frames of one connection. Turns on
// any strand push into it; one writer coroutine drains it in batches, so
// frames leave in push order and many frames share one write. An entry is a
// block of one or more frames, each ending in '\n' (a turn's batch of events
// is one block: one allocation, written as it is). Blocks are immutable and
// shared: a session's events reach every subscribed connection without a
// copy.
//
// It also holds the connection's budget for response bytes (ServerConfig::
// max_response_bytes*): a request that builds a large answer (a page of
// session/events) reserves its bytes first, waiting while the connection or
// the daemon holds too many built and unwritten, and its block gives them
// back once written or dropped. A peer that pipelines requests and reads
// nothing then costs a bounded amount of memory.
#pragma once

#include "util/wakeup.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace harnessd::server {

/// Frames ready to write, shared by every outbox that queues them.
using Block = std::shared_ptr<const std::string>;

/// Bytes taken against a limit, with coroutines waiting for some to come
/// back. Thread-safe.
class ByteBudget {
 public:
  explicit ByteBudget(std::size_t limit) : limit_(limit) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  /// Takes `bytes` if they fit; an amount over the limit fits only when
  /// nothing is taken. Otherwise `waiter` (if any) is woken once bytes come
  /// back, and the answer is false.
  bool take(std::size_t bytes, const std::shared_ptr<util::Wakeup>& waiter);
  /// Takes `bytes` whether they fit or not (an answer already built).
  void take_anyway(std::size_t bytes);
  void give(std::size_t bytes);
  /// `waiter` stops waiting.
  void forget(const std::shared_ptr<util::Wakeup>& waiter);

  std::size_t used() const;
  std::size_t limit() const noexcept { return limit_; }

 private:
  mutable std::mutex mutex_;
  const std::size_t limit_;
  std::size_t used_ = 0;
  std::vector<std::shared_ptr<util::Wakeup>> waiters_;
};

/// Response bytes held against a connection's budget and the daemon's,
/// given back when the charge is destroyed. Move-only.
class ResponseCharge {
 public:
  ResponseCharge() = default;
  ResponseCharge(std::shared_ptr<ByteBudget> connection, std::shared_ptr<ByteBudget> shared, std::size_t bytes)
      : connection_(std::move(connection)), shared_(std::move(shared)), bytes_(bytes) {}
  ResponseCharge(ResponseCharge&& other) noexcept;
  ResponseCharge& operator=(ResponseCharge&& other) noexcept;
  ~ResponseCharge() { release(); }

  std::size_t bytes() const noexcept { return bytes_; }
  /// Holds `bytes` from now on: fewer gives the rest back, more is taken
  /// without waiting (the answer is built by then).
  void resize(std::size_t bytes);
  /// Moves up to `bytes` of this charge into a charge of their own.
  ResponseCharge split(std::size_t bytes);
  /// Adds `other`'s bytes (a charge against the same budgets) to this one.
  void absorb(ResponseCharge other);

 private:
  void release() noexcept;

  std::shared_ptr<ByteBudget> connection_;
  std::shared_ptr<ByteBudget> shared_;
  std::size_t bytes_ = 0;
};

/// Thread-safe except where noted.
class Outbox {
 public:
  Outbox(boost::asio::any_io_executor writer_executor, std::size_t max_bytes);
  ~Outbox();

  /// Bounds the response bytes of this connection to `per_connection`, and
  /// with every other connection to `shared`'s limit. Call once, before any
  /// reserve(); without it reserve() never waits.
  void limit_responses(std::size_t per_connection, std::shared_ptr<ByteBudget> shared,
                       std::chrono::milliseconds max_wait);

  /// Reserves `bytes` of response budget, waiting up to the max_wait of
  /// limit_responses() for them. Null when they did not come by then, or
  /// once the outbox is closed: the caller answers "overloaded".
  boost::asio::awaitable<std::optional<ResponseCharge>> reserve(std::size_t bytes);

  /// A request's charge for the answer its connection queues next: the
  /// frames queued by push(std::string) from now on carry it (each up to its
  /// own size) until they are written or dropped.
  void charge_next_frames(ResponseCharge charge);

  /// A block that holds `charge` until it is destroyed (written or dropped).
  static Block charged_block(std::string frames, ResponseCharge charge);

  /// Queues a block of `frames` frames, waiting while more than max_bytes
  /// are queued (the pusher's backpressure). Returns false, dropping the
  /// block, once the outbox is closed or aborted.
  boost::asio::awaitable<bool> push(Block block, std::size_t frames = 1);
  boost::asio::awaitable<bool> push(std::string frame, std::size_t frames = 1);

  enum class Offer {
    queued,
    refused,     ///< the outbox was already closed
    overflowed,  ///< this offer found the peer too far behind: the outbox is aborted
  };
  /// Queues a block without waiting, for pushers that must never be slowed
  /// (subscriptions). With `limit` bytes or more already queued, the outbox
  /// is aborted instead and overflowed() turns true: the peer cannot keep up.
  Offer offer(Block block, std::size_t frames, std::size_t limit);
  /// Aborts the outbox as overflowed (a pusher's own bound was exceeded).
  Offer overflow();

  /// Writer executor only. Waits for frames and moves all queued ones into
  /// `batch`. Returns false when the outbox is closed and drained.
  boost::asio::awaitable<bool> take(std::vector<Block>& batch);

  /// Writer executor only, without waiting: appends what is queued now.
  void take_ready(std::vector<Block>& batch);

  /// Writer executor only: whether the last take() handed out only offered
  /// blocks (subscribed events, which may wait a moment to share a write).
  bool took_only_offers() const noexcept { return took_only_offers_; }

  /// Writer executor only: frames in the blocks handed out by take() so far
  /// (for metrics; a block's frames are counted by whoever pushed it).
  std::uint64_t frames_taken() const noexcept { return frames_taken_; }

  /// No more pushes; frames already queued are still taken (graceful end).
  void close();
  /// No more pushes and queued frames are dropped (the peer is gone).
  void abort();

  std::size_t queued_bytes() const;
  /// True once offer() aborted the outbox.
  bool overflowed() const;

 private:
  void wake_all_locked();
  void queue_locked(Block block, std::size_t frames);
  void move_queued_locked(std::vector<Block>& batch);
  void abort_locked();
  /// Waits until a push may proceed; false once closed. Returns with the
  /// lock held in `lock` when true.
  boost::asio::awaitable<bool> wait_for_space(std::unique_lock<std::mutex>& lock);

  mutable std::mutex mutex_;
  std::vector<Block> frames_;  // a vector: an idle outbox allocates nothing
  std::size_t bytes_ = 0;
  std::size_t frame_count_ = 0;     ///< frames in frames_ (a block may hold several)
  std::uint64_t frames_taken_ = 0;  ///< writer-side
  const std::size_t max_bytes_;
  bool closed_ = false;
  bool overflowed_ = false;
  bool pushed_since_take_ = false;  ///< a push() (not an offer()) queued a block
  bool took_only_offers_ = false;   ///< writer-side
  bool writer_waiting_ = false;
  std::shared_ptr<util::Wakeup> writer_wakeup_;
  std::vector<std::shared_ptr<util::Wakeup>> space_waiters_;
  std::shared_ptr<ByteBudget> response_budget_;  ///< this connection's; null: unbounded
  std::shared_ptr<ByteBudget> shared_response_budget_;
  std::chrono::milliseconds response_wait_{0};
  ResponseCharge next_frames_charge_;  ///< see charge_next_frames()
};

}  // namespace harnessd::server
