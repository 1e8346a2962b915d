#include "detail/group_commit.hpp"

#include "util/wakeup.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <spdlog/spdlog.h>

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cerrno>
#include <cstring>
#include <deque>
#include <system_error>

namespace harnessd::store::detail {
namespace asio = boost::asio;

LogFile::LogFile(int fd_, std::string path_, bool created_, std::atomic<std::size_t>& open_count)
    : fd(fd_), path(std::move(path_)), created(created_), open_count_(open_count) {
  open_count_.fetch_add(1, std::memory_order_relaxed);
}

LogFile::~LogFile() {
  ::close(fd);
  open_count_.fetch_sub(1, std::memory_order_relaxed);
}

/// What wakes the sync thread. Shared with the wake posted by sync(), which
/// may run on an I/O thread after this GroupCommit is gone.
struct GroupCommit::Wake {
  std::condition_variable cv;
  std::atomic<bool> posted{false};
  std::atomic<bool> gathering{false};  ///< the thread waits out a gap: no wake needed
  std::atomic<bool> pending{false};    ///< a round is queued or under way: turn ends yield to it

  // Synced turns not woken yet: release() wakes them one per pass.
  std::mutex release_mutex;
  std::deque<std::shared_ptr<util::Wakeup>> synced;
  bool releasing = false;  ///< a release() is queued
};

namespace {
// The longest a turn's sync waits for others to share its round.
constexpr std::chrono::milliseconds max_gather{5};

// The sync thread runs SCHED_BATCH (run()), so its wakes never preempt the
// I/O thread: a syncfs(2) sleeps about a dozen times (writeback, each log's
// pages, the journal, the flush), and on a core the two share, each wake
// was a switch in the middle of a handler. It runs instead when the I/O
// thread yields: here, as a turn ends while a round is pending, at most
// once per interval, and it then takes every step whose I/O is done. One
// core, `harness-bench` against `harnessd --threads 1`, jsonl made 15 % more
// notifications a second at 100/100/64 and 1000/100/64 more still
// (bench/ANALYSIS.md). On an idle core it runs at once, as before.
constexpr std::chrono::microseconds yield_interval{200};

void yield_to_sync_thread() {
  thread_local std::chrono::steady_clock::time_point last_yield;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_yield < yield_interval) return;
  last_yield = now;
  ::sched_yield();
}
}  // namespace

struct GroupCommit::Request {
  std::shared_ptr<LogFile> file;
  std::shared_ptr<util::Wakeup> wakeup;
  std::atomic<bool> done{false};
  int error = 0;  // written before `done`, read after it
};

GroupCommit::GroupCommit(int root_fd, SyncMode mode, std::chrono::milliseconds interval)
    : root_fd_(root_fd), mode_(mode), interval_(interval), wake_(std::make_shared<Wake>()) {
  if (mode_ != SyncMode::none) thread_ = std::thread([this] { run(); });
}

GroupCommit::~GroupCommit() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_->cv.notify_one();
  if (thread_.joinable()) thread_.join();
}

asio::awaitable<void> GroupCommit::sync(std::shared_ptr<LogFile> file) {
  auto request = std::make_shared<Request>();
  request->file = std::move(file);
  const auto executor = co_await asio::this_coro::executor;
  request->wakeup = util::Wakeup::create(executor);
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(request);
  }
  // The sync thread is woken by a handler queued behind the ready ones, not
  // here: woken at once, it would take the CPU from this thread (on a busy
  // core, the one it shares) and sync this one turn alone. Queued, it finds
  // every turn that ended in this pass of the event loop: on one core, 100
  // busy sessions went from about 3 to 14 turns per sync round, and the
  // daemon's CPU per notification fell by 10-24 % (bench/ANALYSIS.md).
  if (wake_->pending.load(std::memory_order_relaxed)) yield_to_sync_thread();
  if (!wake_->posted.exchange(true)) {
    asio::post(executor, [wake = wake_] {
      wake->posted.store(false);
      wake->pending.store(true, std::memory_order_relaxed);
      if (!wake->gathering.load()) wake->cv.notify_one();
    });
  }
  while (!request->done.load(std::memory_order_acquire)) co_await request->wakeup->wait();
  if (request->error != 0) {
    throw std::system_error(request->error, std::generic_category(), "sync " + request->file->path);
  }
}

void GroupCommit::mark_dirty() {
  std::lock_guard lock(mutex_);
  dirty_ = true;
}

std::uint64_t GroupCommit::rounds() const {
  std::lock_guard lock(mutex_);
  return rounds_;
}

void GroupCommit::run() {
  sched_param no_priority{};
  if (::sched_setscheduler(0, SCHED_BATCH, &no_priority) != 0) {
    spdlog::debug("sync thread: SCHED_BATCH refused ({}); its wakes may preempt an I/O thread",
                  std::strerror(errno));
  }
  std::vector<std::shared_ptr<Request>> round;
  std::chrono::steady_clock::time_point last_end;
  std::chrono::steady_clock::duration last_took{};
  std::unique_lock lock(mutex_);
  for (;;) {
    if (mode_ == SyncMode::batch) {
      wake_->cv.wait_for(lock, interval_, [this] { return stopping_; });
    } else {
      wake_->cv.wait(lock, [this] {
        if (stopping_ || !queue_.empty()) return true;
        wake_->pending.store(false, std::memory_order_relaxed);  // nothing to yield to
        return false;
      });
      // A round starts no sooner after the last one than that one took:
      // turns ending meanwhile share it. With a busy event loop of short
      // passes (each a wake), rounds had shrunk to about one turn each.
      // The thread syncs at most half the time; when idle, nobody waits.
      const auto ready_at = last_end + last_took;
      if (!stopping_ && std::chrono::steady_clock::now() < ready_at) {
        wake_->gathering.store(true);
        wake_->cv.wait_until(lock, ready_at, [this] { return stopping_; });
        wake_->gathering.store(false);
      }
    }
    // Stopping still syncs what is pending: a clean exit loses nothing.
    const bool stopping = stopping_;
    const bool dirty = std::exchange(dirty_, false);
    round.swap(queue_);
    if (round.empty() && !dirty) {
      if (stopping) return;
      continue;
    }
    ++rounds_;
    lock.unlock();
    const auto began = std::chrono::steady_clock::now();
    if (round.empty()) {
      if (::syncfs(root_fd_) != 0) spdlog::error("syncfs of the session root failed: {}", std::strerror(errno));
    } else {
      sync_round(round);
    }
    last_end = std::chrono::steady_clock::now();
    last_took = std::min<std::chrono::steady_clock::duration>(last_end - began, max_gather);
    lock.lock();
    if (stopping && queue_.empty()) return;
  }
}

void GroupCommit::sync_round(std::vector<std::shared_ptr<Request>>& round) {
  bool one_file = true;
  for (const auto& request : round) one_file = one_file && request->file == round.front()->file;
  int error = 0;
  if (one_file) {
    LogFile& file = *round.front()->file;
    if (::fdatasync(file.fd) != 0) error = errno;
    // A new file's name lives in the directory: sync it once, too.
    if (error == 0 && file.created.exchange(false) && ::fsync(root_fd_) != 0) error = errno;
  } else {
    if (::syncfs(root_fd_) != 0) error = errno;
    if (error == 0) {
      for (const auto& request : round) request->file->created.store(false);
    }
  }
  bool post = false;
  {
    std::lock_guard lock(wake_->release_mutex);
    for (const auto& request : round) {
      request->error = error;
      request->done.store(true, std::memory_order_release);
      wake_->synced.push_back(request->wakeup);
    }
    post = !std::exchange(wake_->releasing, true);
  }
  const asio::any_io_executor executor = round.front()->wakeup->executor();
  // The files are let go before any turn is woken: a woken turn may close
  // its log at once and expect it closed.
  round.clear();
  if (post) asio::post(executor, [wake = wake_, executor] { release(wake, executor); });
}

// A round ends with every turn in it synced at once: a hundred turns that
// each send their answer and take their next prompt. Woken together, they
// would all be queued on the event loop at once, and every handler queued
// behind them (a light session's prompt, at each of its hops) would wait
// for all of them. So they are woken one per pass of the event loop: this
// handler wakes one and queues itself again behind it. Beside 100 busy
// sessions on one core, a light session's first notification went from a
// p99 of 6-9 ms to 2-5 ms (bench/ANALYSIS.md); the busy ones kept their
// throughput, since a pass is short when little else waits.
void GroupCommit::release(const std::shared_ptr<Wake>& wake, const asio::any_io_executor& executor) {
  std::shared_ptr<util::Wakeup> next;
  bool more = false;
  {
    std::lock_guard lock(wake->release_mutex);
    if (!wake->synced.empty()) {
      next = std::move(wake->synced.front());
      wake->synced.pop_front();
    }
    more = !wake->synced.empty();
    wake->releasing = more;
  }
  if (next) next->notify();
  if (more) asio::post(executor, [wake, executor] { release(wake, executor); });
}

}  // namespace harnessd::store::detail
