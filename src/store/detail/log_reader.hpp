// Reading session logs without opening the session: what session/list needs
// of a log (its header and its last lines) and pages of its events. Both run
// on the disk pool and read only complete lines, so a log being appended to
// at the same time reads as it stood a moment earlier.
#pragma once

#include "log_index.hpp"
#include "store/catalog.hpp"
#include "store/event_store.hpp"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace harnessd::store::detail {

/// The header and the last lines of the log at `path`; null when the file
/// is not a readable session log (a warning says why).
std::optional<SessionInfo> summarize_log(const std::string& path);

/// Events with seq > after_seq (the log's lines after the header, counted
/// from seq 0). Null when the file does not exist. Throws std::system_error
/// for a line before the last that is not a JSON object (store::errc).
/// With an `index` the scan starts at its nearest mark and skips to its
/// known end once the page is full, and what it sees goes into the index;
/// `bytes_read`, when given, counts the bytes read from the file.
std::optional<EventPage> read_log_page(const std::string& path, std::int64_t after_seq, std::size_t limit,
                                       std::size_t max_bytes, LogIndex* index = nullptr,
                                       std::atomic<std::uint64_t>* bytes_read = nullptr);

}  // namespace harnessd::store::detail
