// All loaded sessions by id, shared by every connection, so a busy session
// is busy for everyone. A session stays loaded (log open, conversation in
// memory) while anyone uses it; idle ones are evicted after a while, and the
// least recently used ones whenever too many logs are open. An evicted
// session loads again on its next prompt, exactly as after a restart.
#pragma once

#include "harness/admission.hpp"
#include "harness/bulk_lane.hpp"
#include "harness/instruction_cache.hpp"
#include "harness/session.hpp"
#include "harness/system_prompt.hpp"
#include "harness/turn_stats.hpp"
#include "harnessd/protocol/session_id.hpp"
#include "tools/registry.hpp"
#include "tools/tool_pool.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace harnessd::store {
class EventStore;
}

namespace harnessd::harness {

struct HarnessOptions {
  int max_steps_per_turn = 32;
  int max_delegation_depth = 3;
  bool max_tokens_as_success = false;
  /// A session with no prompt for this long is evicted (log closed, memory freed).
  std::chrono::milliseconds session_idle{300'000};
  /// Loaded sessions (one open log each) before the least recently used idle
  /// ones are evicted.
  std::size_t max_open_logs = 1024;
  std::size_t max_running_turns = 256;
  std::size_t max_queued_turns = 4096;
  /// One turn's events (as logged) stop at about this many bytes: the turn
  /// ends with error code TURN_TOO_LARGE.
  std::size_t max_turn_bytes = std::size_t{64} << 20;
  /// The persona section of the system prompt (a template, see system_prompt.hpp).
  std::string persona{default_persona};
  /// How long a turn waits for an approval or an answer before it goes on
  /// without (--approval-timeout-ms).
  std::chrono::milliseconds approval_timeout{600'000};
  /// Threads for blocking tool work (file reads, tree walks).
  unsigned tool_threads = 2;
  /// Turns producing bulk at once (BulkLane): one per I/O thread.
  std::size_t bulk_slots = 1;
  tools::SandboxOptions sandbox;
};

/// Thread-safe.
class SessionRegistry {
 public:
  SessionRegistry(boost::asio::any_io_executor executor, store::EventStore& store,
                  HarnessOptions options);

  /// The session with this id, created (not yet loaded) when unknown.
  std::shared_ptr<Session> get_or_create(std::string_view id);
  /// The session with this id, or null.
  std::shared_ptr<Session> find(std::string_view id) const;
  /// A new child session with a fresh id that fits the id limit.
  std::shared_ptr<Session> create_child(const Session& parent);

  /// session/delete's first step, taken before the store removes the log.
  enum class Detach {
    absent,    ///< not loaded here
    detached,  ///< taken out: the next prompt of the id starts afresh
    busy,      ///< a turn of it runs or waits to run: left alone
  };
  /// Takes the session out of the registry unless it is busy. It stays
  /// reserved for good, so a prompt that already held a reference to it is
  /// refused as busy instead of running on a log that is going away; it is
  /// freed (its log closed) with the last reference.
  Detach detach(std::string_view id);

  /// Drops `session` from the registry if it still stands for its id (its
  /// store copy is gone: the next prompt of the id starts afresh).
  void forget(const std::shared_ptr<Session>& session);

  /// Evicts sessions idle for longer than the idle limit, then, while more
  /// than max_open_logs are loaded, the least recently used idle ones. A
  /// session is idle when nothing but the registry refers to it. Returns
  /// how many were evicted.
  std::size_t evict_idle();

  /// The daemon stops: every loaded session's background processes are
  /// killed (on its strand), so nothing of theirs outlives the daemon or
  /// keeps its event loop waiting.
  void kill_background_tasks();

  std::size_t size() const;
  store::EventStore& store() noexcept { return store_; }
  const HarnessOptions& options() const noexcept { return options_; }
  TurnStats& stats() noexcept { return stats_; }
  Admission& admission() noexcept { return admission_; }
  BulkLane& bulk_lane() noexcept { return bulk_lane_; }
  /// For a prompt refused as overloaded: roughly when a slot may be free.
  std::int64_t retry_after_ms() const;
  std::uint64_t evicted() const noexcept { return evicted_.load(std::memory_order_relaxed); }
  /// The tools sessions offer their model: `subagent` from the start, the
  /// rest added at start-up (tools::add_builtin_tools), before any turn.
  tools::ToolRegistry& tools() noexcept { return tools_; }
  const tools::ToolRegistry& tools() const noexcept { return tools_; }
  tools::ToolPool& tool_pool() noexcept { return tool_pool_; }
  /// Where a turn does its short reads before the first request (the
  /// AGENTS.md chain): a thread of its own, so a turn never starts behind
  /// other sessions' long tool calls.
  tools::ToolPool& setup_pool() noexcept { return setup_pool_; }
  InstructionCache& instruction_cache() noexcept { return instruction_cache_; }

 private:
  std::shared_ptr<Session> make_session(std::string id, std::optional<std::string> parent, int depth);

  boost::asio::any_io_executor executor_;
  store::EventStore& store_;
  const HarnessOptions options_;
  TurnStats stats_;
  Admission admission_;
  BulkLane bulk_lane_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Session>, std::less<>> sessions_;
  std::uint64_t child_counter_ = 0;
  std::atomic<std::uint64_t> evicted_{0};
  tools::ToolRegistry tools_;
  tools::ToolPool tool_pool_;
  tools::ToolPool setup_pool_;
  InstructionCache instruction_cache_;
};

using protocol::max_session_id_bytes;

/// Steady-clock milliseconds: the clock of idle eviction.
std::int64_t steady_now_ms();

}  // namespace harnessd::harness
