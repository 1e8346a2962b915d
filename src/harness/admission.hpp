// Admission control: at most max_running turns run at once, the next
// max_queued prompts wait in FIFO order, and beyond that a prompt is refused
// at once (-32005). Past a point, more concurrent turns only add memory and
// latency: every turn shares the same cores.
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
  boost::asio::awaitable<Result> acquire(llm::CancelScope& cancel);

  /// Gives a slot back: the longest waiter gets it.
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
  std::deque<std::shared_ptr<Waiter>> waiters_;
};

}  // namespace harnessd::harness
