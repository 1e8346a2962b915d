// PeriodicTask: the daemon's housekeeping and watchdog loops must leave the
// event loop when stopped, or the daemon never exits after its last
// connection closed.
#include "util/periodic_task.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

using namespace harnessd;
namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

/// Runs `io` on two threads until it runs out of work or `limit` passes.
void run_two_threads(asio::io_context& io, milliseconds limit) {
  std::thread other([&] { io.run_for(limit); });
  io.run_for(limit);
  other.join();
}

}  // namespace

TEST_CASE("a periodic task ticks every period until stopped, then leaves the event loop") {
  asio::io_context io(2);
  auto strand = asio::make_strand(io);
  int ticks = 0;
  util::PeriodicTask task(strand, milliseconds(2), [&] {
    if (++ticks == 3) task.stop();
  });
  asio::post(strand, [&] { task.start(); });
  run_two_threads(io, milliseconds(2000));
  CHECK(ticks == 3);
  CHECK(io.stopped());
}

TEST_CASE("a periodic task stopped after its timer fired, before its tick ran, ticks no more") {
  asio::io_context io(2);
  auto strand = asio::make_strand(io);
  int ticks = 0;
  util::PeriodicTask task(strand, milliseconds(1), [&] { ++ticks; });
  asio::post(strand, [&] {
    task.start();
    // The strand is held past the period: the other thread's reactor sees
    // the timer fire, and its completion waits in the strand's queue when
    // stop() comes, out of reach of the timer's cancel().
    std::this_thread::sleep_for(milliseconds(30));
    task.stop();
  });
  run_two_threads(io, milliseconds(2000));
  CHECK(ticks == 0);
  CHECK(io.stopped());
}
