// The ordered, bounded queue of outgoing frames of one connection. Turns on
// any strand push into it; one writer coroutine drains it in batches, so
// frames leave in push order and many frames share one write. An entry is a
// block of one or more frames, each ending in '\n' (a turn's batch of events
// is one block: one allocation, written as it is).
#pragma once

#include "util/wakeup.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace harnessd::server {

/// Thread-safe except where noted.
class Outbox {
 public:
  Outbox(boost::asio::any_io_executor writer_executor, std::size_t max_bytes);

  /// Queues a frame, waiting while more than max_bytes are queued (the
  /// pusher's backpressure). Returns false, dropping the frame, once the
  /// outbox is closed or aborted.
  boost::asio::awaitable<bool> push(std::string frame, std::size_t frames = 1);

  /// Writer executor only. Waits for frames and moves all queued ones into
  /// `batch`. Returns false when the outbox is closed and drained.
  boost::asio::awaitable<bool> take(std::vector<std::string>& batch);

  /// Writer executor only: frames in the blocks handed out by take() so far
  /// (for metrics; a block's frames are counted by whoever pushed it).
  std::uint64_t frames_taken() const noexcept { return frames_taken_; }

  /// No more pushes; frames already queued are still taken (graceful end).
  void close();
  /// No more pushes and queued frames are dropped (the peer is gone).
  void abort();

  std::size_t queued_bytes() const;

 private:
  void wake_all_locked();
  /// Waits until a push may proceed; false once closed. Returns with the
  /// lock held in `lock` when true.
  boost::asio::awaitable<bool> wait_for_space(std::unique_lock<std::mutex>& lock);

  mutable std::mutex mutex_;
  std::vector<std::string> frames_;  // a vector: an idle outbox allocates nothing
  std::size_t bytes_ = 0;
  std::size_t frame_count_ = 0;     ///< frames in frames_ (a block may hold several)
  std::uint64_t frames_taken_ = 0;  ///< writer-side
  const std::size_t max_bytes_;
  bool closed_ = false;
  bool writer_waiting_ = false;
  std::shared_ptr<util::Wakeup> writer_wakeup_;
  std::vector<std::shared_ptr<util::Wakeup>> space_waiters_;
};

}  // namespace harnessd::server
