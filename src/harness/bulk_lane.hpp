// The lane a turn's bulk work waits in: producing a step's chunks, and every
// stretch of a long turn. The event loop is one FIFO queue, so a handler
// waits behind everything queued before it; with a hundred busy turns in
// that queue, a light session's prompt waits behind all of their work at
// each of its hops. Turns that want to produce bulk wait here instead, off
// the event loop's queue, and are let into it `slots` at a time: the queue
// holds I/O, prompts that start and only a few bulk slices.
//
// A slice runs from its grant until the coroutine next suspends (an I/O
// wait, a model wait, the next enter()). Granting costs one pass of the
// event loop, also when the lane is free, so enter() is also the yield of a
// turn that would otherwise hold its thread.
//
// The line is ordered by each session's recent use of the thread: every
// slice's measured time is charged to its session's Flow, and that charge
// decays exponentially (a time constant of 100 ms). A session that used
// little lately goes ahead of those that use the thread all the time;
// among those, the earlier waiter goes first, and none waits for ever: a
// place is fixed on arrival, and later arrivals' places grow with time.
//
// A session back after a pause (`pass_after`, half a second by default)
// skips the line once: its first slice runs at once, without the pass of
// the event loop a grant costs. That pass is a whole round of every busy
// session's handlers; a light session's prompt otherwise waits for two of
// them here, one for the slice granted before it and one for its own. A
// busy session is never idle that long, so it cannot skip, and the skip
// is one slice: the turn's next enter() waits in line as any other.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace harnessd::harness {

/// Thread-safe.
class BulkLane {
 public:
  /// One session's account in the lane. Guarded by the lane.
  struct Flow {
    double usage_ns = 0;     ///< slice time used, decayed to at_ns
    std::int64_t at_ns = 0;  ///< steady clock; when the flow last had a slice (0: never)
  };

  static constexpr std::chrono::nanoseconds default_pass_after{500'000'000};

  /// `slots`: slices at once, one per I/O thread. A flow without a slice
  /// for `pass_after` skips the line once (nanoseconds::max(): never).
  explicit BulkLane(std::size_t slots, std::chrono::nanoseconds pass_after = default_pass_after);
  ~BulkLane();
  BulkLane(const BulkLane&) = delete;
  BulkLane& operator=(const BulkLane&) = delete;

  /// Waits in line for a slot; returns on the caller's executor holding it
  /// until the caller next suspends. Suspends once, unless `flow` has had
  /// no slice for `pass_after`: then it returns at once. A slice from the
  /// line is charged to `flow`.
  boost::asio::awaitable<void> enter(std::shared_ptr<Flow> flow);

  /// Coroutines waiting in line.
  std::size_t waiting() const;

  struct State;

 private:
  // Shared with every waiter: a coroutine destroyed while it waits (the
  // event loop shutting down) may outlive the registry that owns the lane.
  std::shared_ptr<State> state_;
};

}  // namespace harnessd::harness
