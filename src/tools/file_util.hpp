// What the file tools (read, write, edit, glob, grep) share: argument
// parsing, opening paths without following a symlink planted after
// Workspace::resolve, binary detection, glob matching and a directory walk
// that skips .git and .gitignored paths. Everything here blocks: pool only.
#pragma once

#include "tools/read_tracker.hpp"
#include "tools/tool.hpp"

#include <boost/json/object.hpp>

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::tools::files {

// ---- arguments -------------------------------------------------------------

/// `args[field]` as a string: nullopt when absent (or null); `error` set
/// when present with another type.
std::optional<std::string> string_arg(const boost::json::object& args, std::string_view field, std::string& error);
/// `args[field]` as an integer (an integral double is accepted).
std::optional<std::int64_t> int_arg(const boost::json::object& args, std::string_view field, std::string& error);
std::optional<bool> bool_arg(const boost::json::object& args, std::string_view field, std::string& error);

ToolResult invalid_arguments(std::string message);
ToolResult cancelled_result();

// ---- file descriptors ------------------------------------------------------

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

/// Opens the directory `dir` (absolute) one component at a time from "/",
/// never following a symlink: the fd is exactly the lexical path, so a link
/// planted after resolve() cannot redirect it. `create` makes missing
/// directories on the way. Returns an invalid fd and sets errno on failure
/// (ELOOP/ENOTDIR: a component is a symlink or not a directory).
UniqueFd open_dir_nofollow(const std::filesystem::path& dir, bool create);

/// The directory holding `path` (opened as above) and its last component.
struct Parent {
  UniqueFd dir;
  std::string leaf;
};
std::optional<Parent> open_parent(const std::filesystem::path& path, bool create, int& error);

/// Opens `path` (absolute) for reading without following any symlink.
UniqueFd open_read_nofollow(const std::filesystem::path& path, int& error);

/// The whole of `fd` (a regular file of `size_hint` bytes) in one buffer.
bool read_all(int fd, std::size_t size_hint, std::string& out);

FileStamp stamp_from_stat(const struct stat& st);

/// A file is binary when its first 8 KiB hold a NUL byte (as git and grep
/// decide). Text that is not valid UTF-8 is shown with U+FFFD instead.
bool looks_binary(std::string_view head) noexcept;
inline constexpr std::size_t binary_probe_bytes = 8192;

/// `text` as valid UTF-8 of at most `max_bytes` bytes; `cut` says whether
/// anything was dropped.
std::string display_line(std::string_view text, std::size_t max_bytes, bool& cut);

/// The error for a failed open/stat of `shown` (NOT_FOUND, NOT_A_FILE, ...).
ToolResult open_failure(int error, const std::string& shown);

/// Workspace::resolve() with its refusal as a result
/// (PATH_OUTSIDE_WORKSPACE, or INVALID_PATH when it cannot be resolved).
std::optional<ToolResult> resolve_path(const Workspace& workspace, std::string_view requested,
                                       std::filesystem::path& out);

// ---- changing a file (write, edit) ------------------------------------------------

/// A file's version before a change.
struct Existing {
  bool exists = false;
  std::string content;
  FileStamp stamp;
  mode_t mode = 0;
};

/// Reads the current version of `path` (never through a symlink). A
/// missing file is an error only when `must_exist`.
std::optional<ToolResult> load_for_change(const std::filesystem::path& path, const std::string& shown,
                                          bool must_exist, Existing& out);

/// Replaces `path` with `content` atomically: a temporary file in the same
/// directory (opened without following links, parents created), renamed
/// over it, keeping the old mode. Fails with FS_STALE when the file is no
/// longer the version `before` describes. `written`: the new version.
std::optional<ToolResult> replace_file(const std::filesystem::path& path, std::string_view content,
                                       const Existing& before, const std::string& shown, FileStamp& written);

/// The diff labels of a path as shown ("a/x", "b/x"; absolute paths as they are).
std::string diff_label(const std::string& shown, char side);


// ---- glob ------------------------------------------------------------------

/// `{a,b}` alternatives expanded (nested allowed; at most 256 results).
std::vector<std::string> expand_braces(std::string_view pattern);

/// A glob over '/'-separated relative paths: `*`, `?`, `[...]` within one
/// component (fnmatch, leading dots matched too), `**` as a whole
/// component for any number of components.
class GlobPattern {
 public:
  explicit GlobPattern(std::string_view pattern);
  bool matches(std::string_view path) const;
  /// Whether some path below directory `dir` could match (to prune a walk).
  bool could_match_below(std::string_view dir) const;

 private:
  std::vector<std::string> segments_;
};

/// Several alternatives (brace expansion) of one pattern.
class GlobSet {
 public:
  explicit GlobSet(std::string_view pattern);
  bool matches(std::string_view path) const;
  bool could_match_below(std::string_view dir) const;

 private:
  std::vector<GlobPattern> alternatives_;
};

// ---- directory walk ----------------------------------------------------------

/// One .gitignore file's rules, relative to its directory.
class GitIgnore {
 public:
  explicit GitIgnore(std::string_view text);
  /// nullopt: no rule matched; true: ignored; false: re-included (`!`).
  /// `path` is relative to the .gitignore's directory.
  std::optional<bool> match(std::string_view path, bool is_dir) const;

 private:
  struct Rule {
    GlobPattern glob;
    bool negated;
    bool dir_only;
  };
  std::vector<Rule> rules_;
};

struct WalkOptions {
  const Workspace* workspace = nullptr;
  const llm::CancelScope* cancel = nullptr;
  bool gitignore = true;
  /// Return false to skip a directory (its path relative to the walk's start).
  std::function<bool(std::string_view rel_dir)> enter_dir;
};

struct WalkEntry {
  int dir_fd;                  ///< the directory holding the file
  std::string_view name;       ///< its name there
  std::string_view rel_path;   ///< relative to the walk's start
};

enum class WalkStatus { done, stopped, cancelled, failed };

/// Calls `visit` for each regular file under `start` (a directory), in
/// sorted order, never following symlinks and skipping `.git` and paths
/// ignored by .gitignore files (those between the workspace root and
/// `start` included). `visit` returns false to stop.
WalkStatus walk_files(const std::filesystem::path& start, const WalkOptions& options,
                      const std::function<bool(const WalkEntry&)>& visit, std::string& error);

}  // namespace harnessd::tools::files
