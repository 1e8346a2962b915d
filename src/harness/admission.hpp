// Admission control: at most max_running turns run at once, the next
// max_queued prompts wait in line (FIFO within each of two lines, below),
// and beyond that a prompt is refused at once (-32005). Past a point, more
// concurrent turns only add memory and latency: every turn shares the same
// cores.
//
// A prompt `ahead` (a session back after a pause: a person's next prompt, or
// a session's first) waits in a line of its own, and a freed slot goes to it
// first; while both lines wait, they take turns, so neither starves. Beside
// 1,000 busy sessions and 256 slots, a person's prompt otherwise waited for
// some 700 turns to finish.
#pragma once

#include "llm/cancel_scope.hpp"
#include "util/wakeup.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>

namespace harnessd::harness {

/// Thread-safe.
class Admission {
 public:
  Admission(std::size_t max_running, std::size_t max_queued);

  enum class Result { admitted, overloaded, cancelled };

  /// Takes a running slot, waiting in line while none is free. Returns
  /// `cancelled` at once when `cancel` fires while waiting; the caller
  /// then holds no slot. Run it on the strand `cancel` belongs to.
  boost::asio::awaitable<Result> acquire(llm::CancelScope& cancel, bool ahead = false);

  /// Gives a slot back: the longest waiter of the line whose turn it is gets it.
  void release();

  std::size_t running() const;
  std::size_t queued() const;
  std::size_t max_running() const noexcept { return max_running_; }

 private:
  struct Waiter {
    std::shared_ptr<util::Wakeup> wakeup;
    bool granted = false;
  };

  const std::size_t max_running_;
  const std::size_t max_queued_;
  mutable std::mutex mutex_;
  std::size_t running_ = 0;
  std::deque<std::shared_ptr<Waiter>> ahead_;    ///< prompts of sessions back after a pause
  std::deque<std::shared_ptr<Waiter>> waiters_;  ///< every other prompt
  bool last_went_ahead_ = false;                 ///< the last slot handed over went to `ahead_`
};

}  // namespace harnessd::harness
