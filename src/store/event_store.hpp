// The store layer's interface: each session has one append-only log of
// serialized events, opened once and then used only from the session strand.
// Disk work never runs on an I/O thread: opening and syncing are awaitable.
#pragma once

#include "store/catalog.hpp"
#include "store/coordination.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::store {

/// Line 0 of a session log (docs/protocol.md §7).
struct SessionHeader {
  std::string id;
  std::int64_t created_at_ms = 0;
  std::optional<std::string> cwd;
  std::optional<std::string> parent_session;
  int delegation_depth = 0;

  boost::json::object to_json() const;
};

/// When appended events become durable (docs/protocol.md §7).
enum class SyncMode {
  turn,   ///< every turn's events are synced before its prompt is answered
  batch,  ///< synced at most every sync interval; prompts do not wait
  none,   ///< left to the OS
};

/// One session's durable event log. Not thread-safe: the owning session uses
/// it from its strand only. I/O failures throw std::system_error. Closing
/// (destruction) never blocks on the disk for long: it only closes the file.
class SessionLog {
 public:
  virtual ~SessionLog() = default;

  /// The header as stored (for a reopened log: as first written).
  virtual const boost::json::object& header() const = 0;

  /// The events found in the log when it was opened, oldest first, with a
  /// torn last line already dropped. Moves them out; later calls return none.
  virtual std::vector<boost::json::object> take_loaded_events() = 0;

  /// Hands serialized events (no trailing newlines) to the OS, in order, in
  /// as few writes as possible. On return a crash of the daemon loses none.
  /// `at` is where the log stands after them (for session/list).
  virtual void append(std::span<const std::string_view> events, const LogPosition& at) = 0;

  /// A turn ended: completes once the log's events are as durable as the
  /// store's SyncMode promises (with `turn`: on disk). Strand-safe: runs the
  /// disk work elsewhere and resumes on the caller's executor.
  virtual boost::asio::awaitable<void> end_turn() = 0;

  // --- stores shared by several nodes (PostgreSQL) ---

  /// True when appended events are not durable on return of append():
  /// nobody may see them before commit() completes.
  virtual bool commits_async() const { return false; }
  /// Completes once every appended event is committed. Throws
  /// std::system_error with errc::unavailable or errc::lease_lost.
  virtual boost::asio::awaitable<void> commit() { co_return; }

  /// Events other nodes logged since this log was loaded, as stored.
  struct CatchUp {
    bool from_start = false;  ///< the whole log: the session's state is stale
    std::int64_t first_seq = 0;  ///< seq of events.front()
    std::vector<std::string> events;
  };
  /// What other nodes logged since this node last looked, without taking
  /// the lease (a subscribe on a node where the session does not run).
  virtual boost::asio::awaitable<CatchUp> catch_up() { co_return CatchUp{}; }
  /// A turn starts: a shared store takes the session's lease here (throws
  /// LeaseHeld when another live node has it) and returns what the session
  /// has not seen. Open turns found then are the caller's to close.
  virtual boost::asio::awaitable<CatchUp> begin_turn() { co_return CatchUp{}; }
  /// After the turn settled (also after it failed): gives the lease back.
  /// Never throws.
  virtual boost::asio::awaitable<void> finish_turn() { co_return; }
  /// Whether the session closes a turn left open when it loads the log
  /// (jsonl recovery). A shared store closes it only under the lease, in
  /// begin_turn's caller: the turn may still run on another node.
  virtual bool closes_open_turn_on_load() const { return true; }
};

/// A prompt found the session leased by another live node.
class LeaseHeld : public std::runtime_error {
 public:
  LeaseHeld(std::string session_id, std::string node)
      : std::runtime_error("session " + session_id + " runs on node " + node),
        session_id_(std::move(session_id)),
        node_(std::move(node)) {}
  const std::string& session_id() const noexcept { return session_id_; }
  const std::string& node() const noexcept { return node_; }

 private:
  std::string session_id_;
  std::string node_;
};

/// A page of one session's log (session/events): its lines as stored.
struct EventPage {
  std::vector<std::string> events;
  std::int64_t last_seq = -1;  ///< the log's last seq when read
  bool more = false;           ///< events follow the page's last one
};

enum class OpenMode {
  create,    ///< a new session gets a log
  existing,  ///< only a session that has one
};

class EventStore {
 public:
  virtual ~EventStore() = default;

  /// Opens the log of `header.id`, creating it with `header` when new, or
  /// returning null for a new one with OpenMode::existing. The file work
  /// runs off the caller's thread. Thread-safe for distinct ids.
  virtual boost::asio::awaitable<std::unique_ptr<SessionLog>> open(SessionHeader header,
                                                                   OpenMode mode = OpenMode::create) = 0;

  /// A page of the store's sessions, newest update first. Throws
  /// std::invalid_argument for a bad cursor. Thread-safe.
  virtual boost::asio::awaitable<ListPage> list(std::optional<std::string> cursor, std::size_t limit) = 0;

  /// Events with seq > after_seq, oldest first: at most `limit`, and no
  /// more than `max_bytes` once the page has one. Null for a session with
  /// no log. Never waits for the session's strand: what was handed to the
  /// OS is readable. Thread-safe.
  virtual boost::asio::awaitable<std::optional<EventPage>> read_events(std::string id, std::int64_t after_seq,
                                                                       std::size_t limit,
                                                                       std::size_t max_bytes) = 0;

  /// "jsonl", "memory" or "postgres", for logs and /healthz.
  virtual std::string_view kind() const = 0;

  /// Non-null when several nodes share this store, so a session may run
  /// on another node; the store owns it.
  virtual Coordination* coordination() { return nullptr; }
  /// The database's state for /healthz ("ok" or why not); empty: no database.
  virtual std::string database_status() const { return {}; }
  /// The store's own lines for /metrics (Prometheus text), if any.
  virtual std::string metrics() const { return {}; }

  /// Logs open right now (each holds one file descriptor).
  virtual std::size_t open_logs() const = 0;

  /// Starts the store's own background work (writers, listeners), once the
  /// daemon has set its handlers and before it serves.
  virtual void start() {}
  /// The daemon is stopping and every connection is closed: the store's own
  /// background work (database listeners, writers) ends once what is queued
  /// is done, so the I/O threads can return.
  virtual void begin_stop() {}

  /// Finishes pending disk work (a sync in progress completes) and stops the
  /// store's own threads. Call it after the I/O threads have returned and
  /// before the io_context is destroyed: completions still reach its
  /// executors, and no Asio object dies on a store thread afterwards.
  virtual void stop() {}
};

}  // namespace harnessd::store
