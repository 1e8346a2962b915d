// A condition variable for coroutines on one executor, woken from any thread.
// The waiter sleeps on a steady_timer that never expires on its own; notify()
// cancels that wait under a mutex, so the waiter's completion is queued at
// once (one pass of the event loop, not a post to its strand and then the
// timer's own completion). A wake-up before the wait is never lost.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <mutex>

namespace harnessd::util {

class Wakeup : public std::enable_shared_from_this<Wakeup> {
 public:
  /// `executor` must be the executor (strand) of the coroutine that waits.
  static std::shared_ptr<Wakeup> create(boost::asio::any_io_executor executor) {
    return std::shared_ptr<Wakeup>(new Wakeup(std::move(executor)));
  }

  /// Thread-safe. Wakes the current wait, or makes the next one return at once.
  void notify();

  /// Waiter's executor only, one waiter at a time. Returns after notify()
  /// (possibly spuriously): callers re-check their condition in a loop.
  boost::asio::awaitable<void> wait();

  /// The waiter's executor. Thread-safe: it never changes.
  boost::asio::any_io_executor executor() { return timer_.get_executor(); }

 private:
  struct Arm;
  explicit Wakeup(boost::asio::any_io_executor executor);

  std::mutex mutex_;
  boost::asio::steady_timer timer_;  ///< touched only under mutex_
  bool waiting_ = false;             ///< a wait is armed on timer_
  bool notified_ = false;            ///< a notify() no wait has taken yet
};

}  // namespace harnessd::util
