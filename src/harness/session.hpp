// One agent session: its durable log, its conversation, and the strand that
// serialises everything about it. At most one turn runs at a time: a prompt
// reserves the session (an atomic flag, so an overlapping prompt is refused
// at once even while a turn keeps the strand busy) before it runs.
#pragma once

#include "harnessd/protocol/turn_end.hpp"
#include "harness/bulk_lane.hpp"
#include "harness/event_sink.hpp"
#include "harness/pending_decisions.hpp"
#include "tools/read_tracker.hpp"
#include "tools/task_table.hpp"
#include "tools/workspace.hpp"
#include "harness/event_subscriber.hpp"
#include "llm/cancel_scope.hpp"
#include "llm/chat.hpp"
#include "store/event_store.hpp"
#include "util/wakeup.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/strand.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <atomic>
#include <map>
#include <set>
#include <exception>
#include <mutex>
#include <span>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

namespace harnessd::llm {
class Provider;
}

namespace harnessd::harness {

class SessionRegistry;

/// Whoever prompts sessions (a client connection): a turn remembers its
/// owner, so cancelling "my turns" never touches another client's turn.
class TurnOwner {
 protected:
  ~TurnOwner() = default;
};

/// What tells a request/header's serialized data from the session's last
/// one. A fingerprint, not the text: the text is mostly the system prompt,
/// 1.7 KiB that every idle session would otherwise hold. Only this process
/// compares fingerprints (the log holds the header itself), and a clash,
/// one in 2^64, would leave one header change unlogged, nothing more.
std::uint64_t request_header_fingerprint(std::string_view serialized) noexcept;

/// What a prompt asks for; the connection's initialize choices included.
struct PromptInput {
  boost::json::array content;  ///< validated content blocks
  llm::Provider* provider = nullptr;
  std::string model;
  std::optional<std::int64_t> max_tokens;
  std::optional<std::string> cwd;  ///< the workspace, recorded in the header of a new session
  /// Where the chain of AGENTS.md files starts (a network client's
  /// workspace root); unset: the repository (.git) holding the workspace.
  std::optional<std::string> instructions_root;
  /// How far this prompt's tools may reach (the client's initialize.sandbox).
  tools::SandboxMode sandbox = tools::SandboxMode::workspace_write;
  const TurnOwner* owner = nullptr;  ///< who prompted: cancel(why, owner) matches it
  bool admit = false;              ///< a client's prompt: waits for a running-turn slot
  /// The model's context window in tokens: past 80 % of it the conversation
  /// is compacted before the next request.
  std::int64_t context_window = 128'000;
  llm::ModelSettings settings;
  int max_steps = 0;  ///< model steps per turn; 0: the daemon's limit
  /// When the sink's client is gone, the turn runs on (still logged and
  /// published to subscribers) instead of being cancelled.
  bool run_detached = false;
  /// `ask`: tools that may change something wait for a client's approval.
  protocol::ApprovalPolicy approval_policy = protocol::ApprovalPolicy::never;
};

struct PromptOutcome {
  bool overloaded = false;            ///< refused: the admission queue is full
  std::int64_t retry_after_ms = 0;    ///< with `overloaded`: a hint for the client
  protocol::TurnEndReason reason;     ///< how the settled turn ended
  std::optional<std::string> final_text;  ///< text of the last assistant/message
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Strand = boost::asio::strand<boost::asio::any_io_executor>;

  Session(Strand strand, std::string id, SessionRegistry& registry,
          std::optional<std::string> parent_id, int delegation_depth);

  ~Session();

  const std::string& id() const noexcept { return id_; }
  const Strand& strand() const noexcept { return strand_; }
  /// Strand-only once the session may be loading.
  int delegation_depth() const noexcept { return delegation_depth_; }
  /// Strand-only, once loaded: the workspace recorded in the log header
  /// (nullopt for a log without one).
  const std::optional<std::string>& workspace() const noexcept { return workspace_; }
  /// Strand-only: what this session's tools have read, and its background
  /// processes (killed when the session is evicted or the daemon stops).
  tools::ReadTracker& reads() noexcept { return reads_; }
  tools::TaskTable& tasks() noexcept { return tasks_; }
  /// Strand-only: what the running turn waits for from clients.
  PendingDecisions& decisions() noexcept { return decisions_; }
  /// Thread-safe: "approval" or "question" while the running turn waits.
  std::optional<PendingDecisions::Kind> waiting() const noexcept { return decisions_.waiting(); }

  /// Strand-only, loaded: whether a client allowed `tool` for the rest of
  /// the session (an approval/resolved `allowed-for-session` in the log).
  bool allowed_for_session(std::string_view tool) const { return allowed_tools_.contains(tool); }
  /// Strand-only, loaded: whether the log shows approval or question `id`
  /// requested in the open turn and not yet resolved (what another node
  /// checks before it forwards a decision to the node running the turn).
  bool logged_pending(std::string_view id) const { return logged_pending_.contains(id); }
  /// Strand-only, loaded: the content of each workspace instructions file as
  /// last logged (context/message), and a fingerprint of the last
  /// request/header's serialized data (request_header_fingerprint()).
  std::map<std::string, std::string, std::less<>>& logged_instructions() noexcept { return logged_instructions_; }
  std::optional<std::uint64_t>& logged_request_header() noexcept { return logged_request_header_; }
  /// Strand-only: keeps allowed_for_session() and logged_pending() true to
  /// an event of the log (the turn calls it for the events it makes).
  void track_decision_event(std::string_view type, const boost::json::object& data);

  /// Thread-safe. Reserves the session for one prompt; false while another
  /// prompt holds it. prompt() releases the reservation when it settles.
  bool try_reserve() noexcept;
  /// Thread-safe. Gives back a reservation that prompt() will not run.
  void release() noexcept;
  /// Thread-safe. True while a prompt holds the session.
  bool reserved() const noexcept { return reserved_.load(std::memory_order_acquire); }
  /// Thread-safe. Steady-clock milliseconds of the last prompt's end (or the
  /// session's creation): what idle eviction compares against.
  std::int64_t last_active_ms() const noexcept { return last_active_ms_.load(std::memory_order_relaxed); }

  /// Runs one turn to settlement; the caller holds a reservation
  /// (try_reserve()). Must run on strand(). Throws on store failure (the
  /// turn then has no turn/end).
  boost::asio::awaitable<PromptOutcome> prompt(PromptInput input, EventSink& sink);

  /// Thread-safe. Cancels the running (or queued) turn, if any, and only if
  /// prompted by `owner` when one is given. Returns whether a turn was
  /// cancelled. The turn sees it at its next event, whatever its strand does.
  bool cancel(const std::string& why, const TurnOwner* owner = nullptr);

  /// Must run on strand(). Loads the session's log when it is not loaded
  /// (once, however many callers wait). With OpenMode::existing, false for
  /// a session that has no log. Throws on store failure.
  boost::asio::awaitable<bool> ensure_loaded(std::optional<std::string> cwd, store::OpenMode mode);

  /// On strand(), loaded: with a store shared by several nodes, brings this
  /// node's copy up to what the store has (unless a prompt holds the
  /// session here), handing new events to subscribers in `envelope`.
  boost::asio::awaitable<void> catch_up(EventSink::Envelope envelope);

  /// On strand(), loaded: `subscriber` gets every event logged from now on.
  /// Returns the seq of the last event logged before (-1: none); that one
  /// and all before it are readable from the store.
  std::int64_t subscribe(std::shared_ptr<EventSubscriber> subscriber);
  /// On strand(): no more events for `subscriber`. False if it was not one.
  bool unsubscribe(const EventSubscriber& subscriber);

  // --- used by the turn loop, on strand() ---
  /// Stamps seq and time on an event and appends it, serialized, to `out`.
  /// Not yet in the log: see write_events().
  void append_event(std::string& out, std::string_view type, const boost::json::object& data);
  /// The same for an event that adds `message` to the conversation (user
  /// and assistant messages, tool results): the turn hands over the typed
  /// message it built the event from.
  void append_message_event(std::string& out, std::string_view type, const boost::json::object& data,
                            llm::ChatMessage message);
  /// The same for an event whose data is already serialized and does not
  /// change the conversation (chunks, step boundaries): the hot path.
  void append_serialized_event(std::string& out, std::string_view type, std::string_view data_json);
  /// Hands events made above to the log, in order, in one write.
  void write_events(std::span<const std::string_view> events);
  /// Whether written events must wait for commit_log() before anyone sees
  /// them (a store shared by several nodes).
  bool log_commits_async() const { return log_->commits_async(); }
  /// Completes once every written event is committed; throws
  /// std::system_error (store category) when it cannot be.
  boost::asio::awaitable<void> commit_log();
  /// Gives the block of events just written to every subscriber except
  /// those of `owner` (who get them from the turn's sink).
  void publish(const std::shared_ptr<const std::string>& block, std::size_t count, const TurnOwner* owner);
  /// Completes when the turn's events are as durable as the store promises.
  boost::asio::awaitable<void> end_turn_in_log();
  /// The running prompt came soon after the session's last one settled (a
  /// busy session's next turn), not after a pause.
  bool prompt_follows_closely() const noexcept { return follows_closely_; }
  const std::vector<llm::ChatMessage>& messages() const noexcept { return messages_; }
  /// The seq of the event each message of messages() came from.
  const std::vector<std::int64_t>& message_seqs() const noexcept { return message_seqs_; }
  /// The model context from now on (and on every replay of the log, through
  /// the compact/summary event at `summary_seq`): the summary as a user
  /// message, then the messages of events after `shadowed_to`.
  void apply_compaction(std::string summary, std::int64_t shadowed_to, std::int64_t summary_seq);
  std::int64_t allocate_turn();
  /// The seq the next event appended will get.
  std::int64_t next_seq() const noexcept { return next_seq_; }
  SessionRegistry& registry() noexcept { return registry_; }
  /// This session's account in the registry's BulkLane.
  const std::shared_ptr<BulkLane::Flow>& bulk_flow() const noexcept { return bulk_flow_; }

 private:
  /// False with OpenMode::existing for a session without a log.
  boost::asio::awaitable<bool> load(const std::optional<std::string>& cwd, store::OpenMode mode);
  void replay(std::vector<boost::json::object> events);
  void apply_catch_up(store::SessionLog::CatchUp caught, const EventSink::Envelope& envelope);
  /// Before a turn: takes the store's lease (shared stores), catches up with
  /// what other nodes logged, and closes a turn another node left open.
  boost::asio::awaitable<void> begin_turn_in_log(EventSink& sink, const TurnOwner* owner);
  /// `event` (already written) as one block for subscribers and the sink.
  boost::asio::awaitable<void> deliver(std::shared_ptr<const std::string> block, std::size_t count, EventSink& sink,
                                       const TurnOwner* owner);
  void apply_to_conversation(std::int64_t seq, std::string_view type, const boost::json::object& data);
  /// The turn's end for a store failure; rethrows any other exception.
  static protocol::TurnEndReason store_failure(const std::exception_ptr& failure);
  void touch() noexcept;

  Strand strand_;
  const std::string id_;
  SessionRegistry& registry_;
  const std::optional<std::string> parent_id_;
  int delegation_depth_;  ///< from the stored header once loaded
  std::atomic<bool> reserved_{false};
  std::atomic<std::int64_t> last_active_ms_{0};
  const std::shared_ptr<BulkLane::Flow> bulk_flow_ = std::make_shared<BulkLane::Flow>();

  // Guards running_ and running_owner_, which cancel() reads from any thread.
  std::mutex running_mutex_;
  llm::CancelScope* running_ = nullptr;  ///< the running turn's scope
  const TurnOwner* running_owner_ = nullptr;

  // Strand-only state.
  /// When this session's last prompt settled (steady_now_ms); unset before
  /// its first. A prompt after a pause is admitted ahead of busy sessions'.
  std::optional<std::int64_t> settled_ms_;
  bool follows_closely_ = false;  ///< see prompt_follows_closely()
  std::unique_ptr<store::SessionLog> log_;
  std::int64_t next_seq_ = 0;
  std::int64_t written_seq_ = -1;  ///< the last seq handed to the log
  /// The last seq subscribers were given or can read from the store: where
  /// a new subscription starts. Behind written_seq_ while a commit runs.
  std::int64_t visible_seq_ = -1;
  std::int64_t last_event_time_ms_ = 0;
  std::int64_t next_turn_ = 0;
  std::vector<llm::ChatMessage> messages_;
  std::vector<std::int64_t> message_seqs_;  ///< parallel to messages_
  std::optional<std::int64_t> open_turn_;  ///< while loading: a turn/start without its turn/end
  bool loading_ = false;
  std::shared_ptr<util::Wakeup> loaded_;  ///< wakes whoever waits for a load in progress
  std::vector<std::shared_ptr<EventSubscriber>> subscribers_;
  std::optional<std::string> workspace_;
  tools::ReadTracker reads_;
  tools::TaskTable tasks_;
  PendingDecisions decisions_;
  std::set<std::string, std::less<>> allowed_tools_;
  std::map<std::string, std::string, std::less<>> logged_pending_;  ///< approval/question id -> tool name
  std::map<std::string, std::string, std::less<>> logged_instructions_;  ///< path -> content
  std::optional<std::uint64_t> logged_request_header_;  ///< see logged_request_header()
};

}  // namespace harnessd::harness
