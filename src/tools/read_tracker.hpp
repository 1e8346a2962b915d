// What a session has read, so `write` and `edit` change only files whose
// current content the model has seen: a file changed since (by the user, by
// bash) must be read again first. Strand-only, like the session.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>

namespace harnessd::tools {

/// What identifies a version of a file.
struct FileStamp {
  std::filesystem::file_time_type modified;
  std::uintmax_t size = 0;
  bool operator==(const FileStamp&) const = default;
};

/// The stamp of `path` now, or nullopt when it does not exist.
std::optional<FileStamp> stamp_of(const std::filesystem::path& path);

class ReadTracker {
 public:
  enum class Check { ok, not_observed, stale };

  /// `path` was read (or written) at version `stamp`.
  void record(const std::filesystem::path& path, FileStamp stamp) { seen_[path] = stamp; }

  /// Whether the file at `current` (its version now) may be overwritten.
  Check check(const std::filesystem::path& path, const FileStamp& current) const {
    const auto it = seen_.find(path);
    if (it == seen_.end()) return Check::not_observed;
    return it->second == current ? Check::ok : Check::stale;
  }

 private:
  std::map<std::filesystem::path, FileStamp> seen_;
};

}  // namespace harnessd::tools
