#include "harness/bulk_lane.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>

namespace harnessd::harness {
namespace asio = boost::asio;

namespace {

/// One coroutine in line: it sleeps on a timer that never expires on its
/// own; the grant cancels that wait, which queues its resumption.
struct Waiter {
  Waiter(const asio::any_io_executor& executor, std::shared_ptr<BulkLane::Flow> flow)
      : timer(executor, asio::steady_timer::time_point::max()), flow(std::move(flow)) {}
  asio::steady_timer timer;  ///< touched only under the lane's mutex
  std::shared_ptr<BulkLane::Flow> flow;
  double place = 0;           ///< lower goes first (State::place_of)
  std::uint64_t arrival = 0;  ///< ties go to the earlier
  bool queued = false;
};

struct ByPlace {
  bool operator()(const Waiter* a, const Waiter* b) const {
    return a->place != b->place ? a->place < b->place : a->arrival < b->arrival;
  }
};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct BulkLane::State {
  State(std::size_t slots, std::chrono::nanoseconds pass_after)
      : slots(std::max<std::size_t>(1, slots)), pass_after_ns(pass_after.count()) {}

  /// A flow's use of the thread, decayed to `now_ns`.
  static double usage_at(const BulkLane::Flow& flow, std::int64_t now_ns) {
    return flow.usage_ns * std::exp(-static_cast<double>(now_ns - flow.at_ns) / decay_ns);
  }
  /// The place of a waiter whose flow has used `usage` by `now_ns`: the log
  /// of its usage plus its arrival time in units of the decay. All usage
  /// decays alike, so this orders waiters that came at different times by
  /// their usage at any common time; a waiter's place never changes.
  static double place_of(double usage, std::int64_t now_ns) {
    return std::log(usage + usage_floor_ns) + static_cast<double>(now_ns) / decay_ns;
  }

  /// Under mutex: hands free slots to the first waiters in line.
  void grant_locked() {
    while (busy < slots && !line.empty()) {
      Waiter* next = *line.begin();
      line.erase(line.begin());
      next->queued = false;
      ++busy;
      next->timer.cancel();
    }
  }
  void join_locked(Waiter& waiter) {
    const std::int64_t now = steady_ns();
    waiter.place = place_of(usage_at(*waiter.flow, now), now);
    waiter.arrival = ++arrivals;
    waiter.queued = true;
    line.insert(&waiter);
    grant_locked();
  }
  void slice_done(BulkLane::Flow& flow, std::int64_t spent_ns) {
    const std::int64_t now = steady_ns();
    std::lock_guard lock(mutex);
    flow.usage_ns = usage_at(flow, now) + static_cast<double>(spent_ns);
    flow.at_ns = now;
    --busy;
    grant_locked();
  }
  /// Whether `flow` skips the line: it has had no slice for pass_after.
  /// The skip counts as its slice, so the flow's next enter() waits. Its
  /// time is not charged: the flow's usage has all but decayed by now, and
  /// the slice is as short as any other of its turn.
  bool pass_idle(BulkLane::Flow& flow) {
    const std::int64_t now = steady_ns();
    std::lock_guard lock(mutex);
    // A flow that never had a slice (at_ns 0) has been idle since boot.
    if (now - flow.at_ns < pass_after_ns) return false;
    flow.usage_ns = usage_at(flow, now);
    flow.at_ns = now;
    return true;
  }
  void leave(Waiter& waiter) {
    std::lock_guard lock(mutex);
    if (!waiter.queued) return;
    line.erase(&waiter);
    waiter.queued = false;
  }

  // Usage halves in about 70 ms: a session that ran a turn a second ago is
  // as new; one that runs them back to back stays behind it.
  static constexpr double decay_ns = 100e6;
  // Usage below a microsecond counts as none: those waiters go in arrival order.
  static constexpr double usage_floor_ns = 1e3;

  const std::size_t slots;
  const std::int64_t pass_after_ns;
  mutable std::mutex mutex;
  std::size_t busy = 0;
  std::uint64_t arrivals = 0;
  std::set<Waiter*, ByPlace> line;
};

namespace {

/// Wraps the coroutine's resumption: the slice is over once the coroutine
/// has run up to its next suspension and handed the thread back.
template <class Handler>
struct RunSlice {
  std::shared_ptr<BulkLane::State> state;  ///< first: outlives the handler's frame
  Handler handler;
  const Waiter* waiter;  ///< alive until the handler resumes the coroutine
  void operator()(boost::system::error_code) {
    // The grant (under the lane's mutex) came before this completion was
    // queued: the waiter is out of line, its flow is ours to charge.
    struct Done {
      BulkLane::State& state;
      std::shared_ptr<BulkLane::Flow> flow;
      std::int64_t began = steady_ns();
      ~Done() { state.slice_done(*flow, steady_ns() - began); }
    } done{*state, waiter->flow};
    std::move(handler)();
  }
};

/// Arms the waiter's wait, then puts it in line, under the lane's mutex: a
/// grant on another thread never cancels a wait that is not there yet.
struct Join {
  std::shared_ptr<BulkLane::State> state;
  Waiter* waiter;
  template <class Handler>
  void operator()(Handler&& handler) const {
    std::lock_guard lock(state->mutex);
    waiter->timer.async_wait(RunSlice<std::decay_t<Handler>>{state, std::forward<Handler>(handler), waiter});
    state->join_locked(*waiter);
  }
};

}  // namespace

BulkLane::BulkLane(std::size_t slots, std::chrono::nanoseconds pass_after)
    : state_(std::make_shared<State>(slots, pass_after)) {}

BulkLane::~BulkLane() = default;

asio::awaitable<void> BulkLane::enter(std::shared_ptr<Flow> flow) {
  if (state_->pass_idle(*flow)) co_return;
  Waiter waiter(co_await asio::this_coro::executor, std::move(flow));
  // Holds the state: the frame may be freed after the lane (see state_).
  struct Leave {
    std::shared_ptr<State> state;
    Waiter& waiter;
    ~Leave() { state->leave(waiter); }
  } leave{state_, waiter};
  const Join join{state_, &waiter};
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(join, asio::use_awaitable);
}

std::size_t BulkLane::waiting() const {
  std::lock_guard lock(state_->mutex);
  return state_->line.size();
}

}  // namespace harnessd::harness
