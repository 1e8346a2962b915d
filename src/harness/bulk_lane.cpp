#include "harness/bulk_lane.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
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
  std::int64_t start_ns = 0;  ///< its place: the virtual time it may start at
  std::uint64_t arrival = 0;  ///< ties go to the earlier
  bool queued = false;
};

struct ByPlace {
  bool operator()(const Waiter* a, const Waiter* b) const {
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->arrival < b->arrival;
  }
};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct BulkLane::State {
  explicit State(std::size_t slots) : slots(std::max<std::size_t>(1, slots)) {}

  /// Under mutex: hands free slots to the first waiters in line.
  void grant_locked() {
    while (busy < slots && !line.empty()) {
      Waiter* next = *line.begin();
      line.erase(line.begin());
      next->queued = false;
      ++busy;
      virtual_ns = std::max(virtual_ns, next->start_ns);
      next->timer.cancel();
    }
  }
  void join_locked(Waiter& waiter) {
    waiter.start_ns = std::max(virtual_ns, waiter.flow->finish_ns);
    waiter.arrival = ++arrivals;
    waiter.queued = true;
    line.insert(&waiter);
    grant_locked();
  }
  void slice_done(BulkLane::Flow& flow, std::int64_t start_ns, std::int64_t spent_ns) {
    std::lock_guard lock(mutex);
    flow.finish_ns = start_ns + spent_ns;
    --busy;
    grant_locked();
  }
  void leave(Waiter& waiter) {
    std::lock_guard lock(mutex);
    if (!waiter.queued) return;
    line.erase(&waiter);
    waiter.queued = false;
  }

  const std::size_t slots;
  mutable std::mutex mutex;
  std::size_t busy = 0;
  std::int64_t virtual_ns = 0;  ///< the place of the slice granted last
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
    // queued: the waiter's place is settled.
    struct Done {
      BulkLane::State& state;
      std::shared_ptr<BulkLane::Flow> flow;
      std::int64_t start_ns;
      std::int64_t began = steady_ns();
      ~Done() { state.slice_done(*flow, start_ns, steady_ns() - began); }
    } done{*state, waiter->flow, waiter->start_ns};
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

BulkLane::BulkLane(std::size_t slots) : state_(std::make_shared<State>(slots)) {}

BulkLane::~BulkLane() = default;

asio::awaitable<void> BulkLane::enter(std::shared_ptr<Flow> flow) {
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
