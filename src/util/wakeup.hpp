// A condition variable for coroutines on one executor: a steady_timer that never
// expires on its own, woken from any thread by moving its expiry to the past
// on the waiter's executor (so a wake-up before the wait is never lost).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>

namespace harnessd::util {

class Wakeup : public std::enable_shared_from_this<Wakeup> {
 public:
  /// `executor` must be the executor (strand) of the coroutine that waits.
  static std::shared_ptr<Wakeup> create(boost::asio::any_io_executor executor) {
    return std::shared_ptr<Wakeup>(new Wakeup(std::move(executor)));
  }

  /// Thread-safe. Wakes the current wait, or makes the next one return at once.
  void notify();

  /// Waiter's executor only. Returns after notify() (possibly spuriously):
  /// callers re-check their condition in a loop.
  boost::asio::awaitable<void> wait();

 private:
  explicit Wakeup(boost::asio::any_io_executor executor);
  boost::asio::steady_timer timer_;
};

}  // namespace harnessd::util
