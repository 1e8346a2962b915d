#include "util/periodic_task.hpp"

namespace harnessd::util {

PeriodicTask::PeriodicTask(boost::asio::any_io_executor strand, std::chrono::milliseconds period,
                           std::function<void()> tick)
    : timer_(std::move(strand)), period_(period), tick_(std::move(tick)) {}

void PeriodicTask::start() { arm(); }

void PeriodicTask::stop() {
  stopped_ = true;
  timer_.cancel();
}

void PeriodicTask::arm() {
  if (stopped_) return;
  timer_.expires_after(period_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    // stopped_, not only ec: the completion may have been queued before
    // stop() cancelled the timer.
    if (ec || stopped_) return;
    tick_();
    arm();
  });
}

}  // namespace harnessd::util
