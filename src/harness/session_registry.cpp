#include "harness/session_registry.hpp"
#include "harness/subagent_tool.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

namespace harnessd::harness {

std::int64_t steady_now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

SessionRegistry::SessionRegistry(boost::asio::any_io_executor executor, store::EventStore& store,
                                 HarnessOptions options)
    : executor_(std::move(executor)),
      store_(store),
      options_(options),
      admission_(options.max_running_turns, options.max_queued_turns),
      bulk_lane_(options.bulk_slots),
      tool_pool_(std::max(1u, options.tool_threads)),
      setup_pool_(1, 0) {
  tools_.add(make_subagent_tool());
}

void SessionRegistry::kill_background_tasks() {
  std::vector<std::shared_ptr<Session>> loaded;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, session] : sessions_) loaded.push_back(session);
  }
  for (std::shared_ptr<Session>& session : loaded) {
    boost::asio::post(session->strand(), [session] { session->tasks().kill_all("the daemon is stopping"); });
  }
}

std::shared_ptr<Session> SessionRegistry::make_session(std::string id,
                                                       std::optional<std::string> parent,
                                                       int depth) {
  return std::make_shared<Session>(boost::asio::make_strand(executor_), std::move(id), *this,
                                   std::move(parent), depth);
}

std::shared_ptr<Session> SessionRegistry::get_or_create(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  if (it != sessions_.end()) return it->second;
  auto session = make_session(std::string(id), std::nullopt, 0);
  sessions_.emplace(std::string(id), session);
  return session;
}

std::shared_ptr<Session> SessionRegistry::find(std::string_view id) const {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

std::shared_ptr<Session> SessionRegistry::create_child(const Session& parent) {
  // Random suffix: child ids stay unique across daemon restarts too.
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::lock_guard lock(mutex_);
  for (;;) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random()));
    const std::string tail = ".sub-" + std::to_string(++child_counter_) + "-" + suffix;
    // The parent's id is shortened (at a UTF-8 character boundary) when the
    // child's would exceed the id limit: the tail alone keeps it unique, and
    // clients can always prompt the child directly.
    std::size_t keep = std::min(parent.id().size(), max_session_id_bytes - tail.size());
    while (keep > 0 && keep < parent.id().size() &&
           (static_cast<unsigned char>(parent.id()[keep]) & 0xC0) == 0x80) {
      --keep;
    }
    std::string id = parent.id().substr(0, keep) + tail;
    if (sessions_.contains(id)) continue;
    // Same strand as the parent: the child turn runs inside the parent's turn.
    auto child = std::make_shared<Session>(parent.strand(), id, *this, parent.id(),
                                           parent.delegation_depth() + 1);
    sessions_.emplace(std::move(id), child);
    return child;
  }
}

SessionRegistry::Detach SessionRegistry::detach(std::string_view id) {
  std::shared_ptr<Session> detached;  // released outside the lock: its log may close
  {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return Detach::absent;
    if (!it->second->try_reserve()) return Detach::busy;
    detached = std::move(it->second);
    sessions_.erase(it);
  }
  return Detach::detached;
}

void SessionRegistry::forget(const std::shared_ptr<Session>& session) {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(session->id());
  if (it != sessions_.end() && it->second == session) sessions_.erase(it);
}

std::size_t SessionRegistry::evict_idle() {
  std::vector<std::shared_ptr<Session>> evicted;
  {
    std::lock_guard lock(mutex_);
    const std::int64_t now = steady_now_ms();
    const std::int64_t idle_ms = options_.session_idle.count();
    // Evicting a tenth below the cap spreads the scan over many prompts.
    const std::size_t keep = sessions_.size() > options_.max_open_logs
                                 ? options_.max_open_logs - options_.max_open_logs / 10
                                 : sessions_.size();
    std::vector<std::pair<std::int64_t, std::map<std::string, std::shared_ptr<Session>>::iterator>> idle;
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      // Only the registry refers to it, so nobody can start using it without
      // this lock: it is safe to drop. A reserved session is always in use.
      if (it->second.use_count() != 1 || it->second->reserved()) continue;
      idle.emplace_back(it->second->last_active_ms(), it);
    }
    std::sort(idle.begin(), idle.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::size_t loaded = sessions_.size();
    for (auto& [last_active, it] : idle) {
      if (now - last_active < idle_ms && loaded <= keep) break;
      evicted.push_back(std::move(it->second));
      sessions_.erase(it);
      --loaded;
    }
  }
  evicted_.fetch_add(evicted.size(), std::memory_order_relaxed);
  return evicted.size();  // the logs close here, outside the lock
}

std::int64_t SessionRegistry::retry_after_ms() const {
  // The mean turn duration: about when the queue has moved by one slot per
  // running turn. At least 100 ms, so clients never spin.
  const std::uint64_t turns = stats_.total.load(std::memory_order_relaxed);
  const std::uint64_t sum_us = stats_.duration_sum_us.load(std::memory_order_relaxed);
  const std::int64_t mean_ms = turns > 0 ? static_cast<std::int64_t>(sum_us / turns / 1000) : 1000;
  return std::clamp<std::int64_t>(mean_ms, 100, 60'000);
}

std::size_t SessionRegistry::size() const {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

}  // namespace harnessd::harness
