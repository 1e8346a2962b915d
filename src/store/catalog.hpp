// What session/list shows of every session a store holds, kept in memory
// and current: a store fills it when it opens or finds a log, and each
// append moves its session's entry forward. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::store {

struct SessionInfo {
  std::string id;
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;  ///< time of the last event, or created_at_ms
  std::int64_t last_seq = -1;      ///< -1: no events
  std::int64_t turns = 0;          ///< turns started
  std::optional<std::string> parent;
  bool leased = false;  ///< a node runs a turn of it (stores shared by several nodes)
  /// The session was deleted: listed and found no more until a log of its
  /// id is opened again (the entry stays, since handles are never dangling).
  bool removed = false;
};

/// Where a log stands after an append.
struct LogPosition {
  std::int64_t last_seq = -1;
  std::int64_t turns = 0;
  std::int64_t time_ms = 0;
};

/// session/list's cursor: "UPDATED_AT ID" of the last session of a page.
struct ListCursor {
  std::int64_t updated_at = 0;
  std::string id;
};
/// Throws std::invalid_argument for text that is not a cursor.
ListCursor parse_list_cursor(std::string_view text);
std::string list_cursor(const SessionInfo& last);

struct ListPage {
  std::vector<SessionInfo> sessions;
  std::optional<std::string> next_cursor;  ///< set when more sessions follow
};

class Catalog {
 public:
  /// An entry's address is stable for the catalog's life: entries are never
  /// removed, so a log keeps its handle while it is open.
  using Handle = SessionInfo*;

  /// A log was opened in this process (or created): `info` is its state.
  Handle opened(SessionInfo info);
  /// Events were appended to the log of `entry`.
  void advance(Handle entry, const LogPosition& at);
  /// A log found on disk: kept unless the catalog already knows a later state.
  void found(SessionInfo info);
  /// The session was deleted; false when the catalog did not list it.
  bool remove(std::string_view id);

  bool contains(std::string_view id) const;
  std::optional<SessionInfo> find(std::string_view id) const;

  /// Sessions by last update, newest first (then by id), after `cursor`
  /// (a next_cursor of an earlier page). Throws std::invalid_argument for
  /// a cursor that is not one.
  ListPage page(const std::optional<std::string>& cursor, std::size_t limit) const;

  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, SessionInfo, std::less<>> sessions_;
};

}  // namespace harnessd::store
