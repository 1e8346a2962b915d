// Work repeated at a fixed period on one strand until stop(): the daemon's
// housekeeping and its systemd watchdog ping.
//
// stop() does not rely on cancelling the timer alone. A timer that has
// already fired has its completion queued, and cancel() no longer reaches
// it: the tick would run and arm the timer again, and the event loop, kept
// alive by it, would never return (a daemon that ignored SIGTERM after its
// connections had closed). A flag on the same strand ends the loop wherever
// it is.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>

namespace harnessd::util {

class PeriodicTask {
 public:
  /// Runs `tick` on `strand` every `period`, the first time one period
  /// after start(). The task must outlive the strand's event loop.
  PeriodicTask(boost::asio::any_io_executor strand, std::chrono::milliseconds period, std::function<void()> tick);

  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  /// On the strand, once.
  void start();
  /// On the strand. No tick runs after it, and nothing of the task is left
  /// pending on the event loop.
  void stop();

 private:
  void arm();

  boost::asio::steady_timer timer_;
  std::chrono::milliseconds period_;
  std::function<void()> tick_;
  bool stopped_ = false;
};

}  // namespace harnessd::util
