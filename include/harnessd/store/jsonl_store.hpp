// The embedded default store: one JSONL file per session under a root
// directory; header line, then one event per line, fsync at turn end.
#pragma once

#include "harnessd/store/event_store.hpp"

#include <filesystem>

namespace harnessd::store {

class JsonlStore final : public EventStore {
 public:
  /// Creates `root` if needed. Throws std::system_error when it cannot.
  explicit JsonlStore(std::filesystem::path root);

  std::unique_ptr<SessionLog> open(const SessionHeader& header) override;
  std::string_view kind() const override { return "jsonl"; }

  const std::filesystem::path& root() const noexcept { return root_; }

 private:
  std::filesystem::path root_;
};

/// The file name a session id is stored under: bytes outside [A-Za-z0-9_-]
/// (and '.') are written as %XX, so any id is a safe, distinct file name;
/// ids whose encoding is too long for a file name end in a SHA-256 digest.
std::string session_file_name(std::string_view session_id);

}  // namespace harnessd::store
