// The store layer's interface: each session has one append-only log of
// serialized events, opened once and then used only from the session strand.
#pragma once

#include <boost/json/object.hpp>

#include <cstdint>
#include <memory>
#include <optional>
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

/// One session's durable event log. Not thread-safe: the owning session uses
/// it from its strand only. I/O failures throw std::system_error.
class SessionLog {
 public:
  virtual ~SessionLog() = default;

  /// The header as stored (for a reopened log: as first written).
  virtual const boost::json::object& header() const = 0;

  /// The events found in the log when it was opened, oldest first, with a
  /// torn last line already dropped. Moves them out; later calls return none.
  virtual std::vector<boost::json::object> take_loaded_events() = 0;

  /// Hands one serialized event (no trailing newline) to the OS.
  virtual void append(std::string_view event_json) = 0;

  /// Makes every appended event durable (fsync).
  virtual void sync() = 0;
};

class EventStore {
 public:
  virtual ~EventStore() = default;

  /// Opens the log of `header.id`, creating it with `header` when new.
  /// Thread-safe for distinct ids.
  virtual std::unique_ptr<SessionLog> open(const SessionHeader& header) = 0;

  /// "jsonl" or "memory", for logs and /healthz.
  virtual std::string_view kind() const = 0;
};

}  // namespace harnessd::store
