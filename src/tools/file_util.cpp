// Shared by the file tools: arguments, symlink-proof opens, binary
// detection, glob matching and the .gitignore-aware directory walk. All of
// it blocks and runs on the ToolPool.
#include "tools/file_util.hpp"

#include "llm/cancel_scope.hpp"
#include "util/utf8.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

namespace harnessd::tools::files {

// ---- arguments -------------------------------------------------------------

std::optional<std::string> string_arg(const boost::json::object& args, std::string_view field, std::string& error) {
  const auto* value = args.if_contains(field);
  if (!value || value->is_null()) return std::nullopt;
  if (!value->is_string()) {
    error = std::string(field) + " must be a string";
    return std::nullopt;
  }
  return std::string(value->get_string());
}

std::optional<std::int64_t> int_arg(const boost::json::object& args, std::string_view field, std::string& error) {
  const auto* value = args.if_contains(field);
  if (!value || value->is_null()) return std::nullopt;
  if (value->is_int64()) return value->get_int64();
  if (value->is_uint64()) {
    if (value->get_uint64() > static_cast<std::uint64_t>(INT64_MAX)) {
      error = std::string(field) + " is too large";
      return std::nullopt;
    }
    return static_cast<std::int64_t>(value->get_uint64());
  }
  if (value->is_double()) {
    const double d = value->get_double();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<std::int64_t>(d);
  }
  error = std::string(field) + " must be an integer";
  return std::nullopt;
}

std::optional<bool> bool_arg(const boost::json::object& args, std::string_view field, std::string& error) {
  const auto* value = args.if_contains(field);
  if (!value || value->is_null()) return std::nullopt;
  if (!value->is_bool()) {
    error = std::string(field) + " must be a boolean";
    return std::nullopt;
  }
  return value->get_bool();
}

ToolResult invalid_arguments(std::string message) { return ToolResult::failure("INVALID_ARGUMENTS", std::move(message)); }

ToolResult cancelled_result() { return ToolResult::failure("CANCELLED", "cancelled"); }

// ---- file descriptors ------------------------------------------------------

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd open_dir_nofollow(const std::filesystem::path& dir, bool create) {
  if (!dir.is_absolute()) {
    errno = EINVAL;
    return UniqueFd{};
  }
  // O_PATH: an ancestor may be searchable without being readable.
  UniqueFd fd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return fd;
  for (const auto& component : dir.relative_path()) {
    const std::string name = component.string();
    if (name.empty() || name == ".") continue;
    if (name == "..") {  // resolved paths have none; refuse rather than guess
      errno = EINVAL;
      return UniqueFd{};
    }
    int next = ::openat(fd.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && create) {
      if (::mkdirat(fd.get(), name.c_str(), 0777) != 0 && errno != EEXIST) return UniqueFd{};
      next = ::openat(fd.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next < 0) return UniqueFd{};
    fd = UniqueFd(next);
  }
  return fd;
}

std::optional<Parent> open_parent(const std::filesystem::path& path, bool create, int& error) {
  const std::filesystem::path leaf = path.filename();
  if (leaf.empty() || leaf == "." || leaf == "..") {
    error = EISDIR;
    return std::nullopt;
  }
  UniqueFd dir = open_dir_nofollow(path.parent_path(), create);
  if (!dir) {
    error = errno;
    return std::nullopt;
  }
  return Parent{std::move(dir), leaf.string()};
}

UniqueFd open_read_nofollow(const std::filesystem::path& path, int& error) {
  if (path == path.root_path()) {
    error = EISDIR;
    return UniqueFd{};
  }
  auto parent = open_parent(path, false, error);
  if (!parent) return UniqueFd{};
  // O_NONBLOCK: a FIFO must not hang the pool thread.
  UniqueFd fd(::openat(parent->dir.get(), parent->leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) error = errno;
  return fd;
}

bool read_all(int fd, std::size_t size_hint, std::string& out) {
  out.clear();
  out.resize(size_hint + 1);  // one more byte to see EOF (or growth) in the same read
  std::size_t used = 0;
  for (;;) {
    if (used == out.size()) out.resize(out.size() * 2 + 4096);
    const ssize_t n = ::read(fd, out.data() + used, out.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  out.resize(used);
  return true;
}

FileStamp stamp_from_stat(const struct stat& st) {
  using namespace std::chrono;
  const sys_time<nanoseconds> modified{seconds{st.st_mtim.tv_sec} + nanoseconds{st.st_mtim.tv_nsec}};
  FileStamp stamp;
  stamp.modified = std::chrono::file_clock::from_sys(modified);
  stamp.size = static_cast<std::uintmax_t>(st.st_size);
  return stamp;
}

bool looks_binary(std::string_view head) noexcept {
  return std::memchr(head.data(), '\0', std::min(head.size(), binary_probe_bytes)) != nullptr;
}

std::string display_line(std::string_view text, std::size_t max_bytes, bool& cut) {
  cut = false;
  if (util::is_valid_utf8(text)) {
    const std::string_view kept = util::cut_utf8(text, max_bytes);
    cut = kept.size() < text.size();
    return std::string(kept);
  }
  const std::string valid = util::valid_utf8(text);
  const std::string_view kept = util::cut_utf8(valid, max_bytes);
  cut = kept.size() < valid.size();
  return std::string(kept);
}

ToolResult open_failure(int error, const std::string& shown) {
  switch (error) {
    case ENOENT:
      return ToolResult::failure("NOT_FOUND", shown + " does not exist");
    case EISDIR:
      return ToolResult::failure("NOT_A_FILE", shown + " is a directory; use glob to list files");
    case ELOOP:
      return ToolResult::failure("PATH_OUTSIDE_WORKSPACE",
                                 shown + " is a symlink (or became one while it was opened); it is not followed");
    case ENOTDIR:
      return ToolResult::failure("NOT_FOUND", shown + ": a parent is not a directory");
    case EACCES:
    case EPERM:
      return ToolResult::failure("PERMISSION_DENIED", shown + ": permission denied");
    default:
      return ToolResult::failure("IO_ERROR", shown + ": " + std::strerror(error));
  }
}

std::optional<ToolResult> resolve_path(const Workspace& workspace, std::string_view requested,
                                       std::filesystem::path& out) {
  Workspace::Resolved resolved = workspace.resolve(requested);
  if (resolved.error.empty()) {
    out = std::move(resolved.path);
    return std::nullopt;
  }
  if (resolved.error.rfind("cannot resolve ", 0) == 0) return ToolResult::failure("INVALID_PATH", resolved.error);
  return ToolResult::failure("PATH_OUTSIDE_WORKSPACE", resolved.error);
}

// ---- changing a file (write, edit) ------------------------------------------------

std::optional<ToolResult> load_for_change(const std::filesystem::path& path, const std::string& shown,
                                          bool must_exist, Existing& out) {
  int error = 0;
  UniqueFd fd = open_read_nofollow(path, error);
  if (!fd) {
    if (error == ENOENT && !must_exist) {
      out.exists = false;
      return std::nullopt;
    }
    return open_failure(error, shown);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return open_failure(errno, shown);
  if (S_ISDIR(st.st_mode)) return open_failure(EISDIR, shown);
  if (!S_ISREG(st.st_mode)) return ToolResult::failure("NOT_A_FILE", shown + " is not a regular file");
  if (!read_all(fd.get(), static_cast<std::size_t>(st.st_size), out.content)) return open_failure(errno, shown);
  out.exists = true;
  out.stamp = stamp_from_stat(st);
  out.mode = st.st_mode & 07777;
  return std::nullopt;
}

namespace {

std::string temp_name() {
  thread_local std::uint64_t state = [] {
    std::random_device device;
    return (std::uint64_t{device()} << 32) ^ device() ^ static_cast<std::uint64_t>(::getpid());
  }();
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  char name[48];
  std::snprintf(name, sizeof name, ".harnessd-%016llx.tmp", static_cast<unsigned long long>(state));
  return name;
}

bool write_fully(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

std::optional<ToolResult> replace_file(const std::filesystem::path& path, std::string_view content,
                                       const Existing& before, const std::string& shown, FileStamp& written) {
  int error = 0;
  auto parent = open_parent(path, true, error);
  if (!parent) return open_failure(error, shown);
  const int dir = parent->dir.get();
  // The version checked by the caller must still be the one on disk.
  struct stat now {};
  if (::fstatat(dir, parent->leaf.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(now.st_mode)) return open_failure(ELOOP, shown);
    if (S_ISDIR(now.st_mode)) return open_failure(EISDIR, shown);
    if (!before.exists || !(stamp_from_stat(now) == before.stamp)) {
      return ToolResult::failure("FS_STALE", shown + " changed while it was being written; read it again");
    }
  } else if (errno != ENOENT) {
    return open_failure(errno, shown);
  } else if (before.exists) {
    return ToolResult::failure("FS_STALE", shown + " was removed while it was being written; read it again");
  }
  std::string temp;
  UniqueFd fd;
  for (int attempt = 0; attempt < 16 && !fd; ++attempt) {
    temp = temp_name();
    fd = UniqueFd(::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                           before.exists ? 0600 : 0666));
    if (!fd && errno != EEXIST) break;
  }
  if (!fd) return open_failure(errno, shown);
  struct stat st {};
  const bool ok = write_fully(fd.get(), content) && (!before.exists || ::fchmod(fd.get(), before.mode) == 0) &&
                  ::fstat(fd.get(), &st) == 0;
  const int write_error = errno;
  fd = UniqueFd{};
  if (!ok || ::renameat(dir, temp.c_str(), dir, parent->leaf.c_str()) != 0) {
    const int failed = ok ? errno : write_error;
    ::unlinkat(dir, temp.c_str(), 0);
    return open_failure(failed, shown);
  }
  written = stamp_from_stat(st);
  return std::nullopt;
}

std::string diff_label(const std::string& shown, char side) {
  if (!shown.empty() && shown.front() == '/') return shown;
  std::string label(1, side);
  label += '/';
  label += shown;
  return label;
}

// ---- glob ------------------------------------------------------------------

namespace {

void expand_into(std::string_view pattern, std::vector<std::string>& out) {
  if (out.size() >= 256) return;
  // The first top-level `{...}` holding a comma.
  std::size_t open = std::string_view::npos;
  int depth = 0;
  std::vector<std::size_t> commas;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (c == '{') {
      if (depth++ == 0) {
        open = i;
        commas.clear();
      }
    } else if (c == '}' && depth > 0) {
      if (--depth == 0) {
        if (!commas.empty()) {
          const std::string_view head = pattern.substr(0, open);
          const std::string_view tail = pattern.substr(i + 1);
          std::size_t from = open + 1;
          commas.push_back(i);
          for (const std::size_t to : commas) {
            std::string alternative(head);
            alternative += pattern.substr(from, to - from);
            alternative += tail;
            expand_into(alternative, out);
            from = to + 1;
          }
          return;
        }
      }
    } else if (c == ',' && depth == 1) {
      commas.push_back(i);
    }
  }
  out.emplace_back(pattern);
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (!part.empty() && part != ".") parts.push_back(part);
    start = end + 1;
  }
  return parts;
}

bool segment_matches(const std::string& pattern, std::string_view name) {
  if (pattern.find_first_of("*?[\\") == std::string::npos) return pattern == name;
  const std::string subject(name);
  return ::fnmatch(pattern.c_str(), subject.c_str(), 0) == 0;
}

bool match_from(const std::vector<std::string>& pat, std::size_t pi, const std::vector<std::string_view>& path,
                std::size_t si) {
  while (pi < pat.size()) {
    if (pat[pi] == "**") {
      while (pi + 1 < pat.size() && pat[pi + 1] == "**") ++pi;
      if (pi + 1 == pat.size()) return true;
      for (std::size_t k = si; k <= path.size(); ++k) {
        if (match_from(pat, pi + 1, path, k)) return true;
      }
      return false;
    }
    if (si == path.size() || !segment_matches(pat[pi], path[si])) return false;
    ++pi;
    ++si;
  }
  return si == path.size();
}

}  // namespace

std::vector<std::string> expand_braces(std::string_view pattern) {
  std::vector<std::string> out;
  expand_into(pattern, out);
  return out;
}

GlobPattern::GlobPattern(std::string_view pattern) {
  for (const std::string_view part : split_path(pattern)) segments_.emplace_back(part);
}

bool GlobPattern::matches(std::string_view path) const { return match_from(segments_, 0, split_path(path), 0); }

bool GlobPattern::could_match_below(std::string_view dir) const {
  const std::vector<std::string_view> parts = split_path(dir);
  std::size_t pi = 0;
  for (const std::string_view part : parts) {
    if (pi == segments_.size()) return false;
    if (segments_[pi] == "**") return true;
    if (!segment_matches(segments_[pi], part)) return false;
    ++pi;
  }
  return pi < segments_.size();
}

GlobSet::GlobSet(std::string_view pattern) {
  for (const std::string& alternative : expand_braces(pattern)) alternatives_.emplace_back(alternative);
}

bool GlobSet::matches(std::string_view path) const {
  return std::any_of(alternatives_.begin(), alternatives_.end(), [&](const GlobPattern& g) { return g.matches(path); });
}

bool GlobSet::could_match_below(std::string_view dir) const {
  return std::any_of(alternatives_.begin(), alternatives_.end(),
                     [&](const GlobPattern& g) { return g.could_match_below(dir); });
}

// ---- .gitignore --------------------------------------------------------------

GitIgnore::GitIgnore(std::string_view text) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // Trailing spaces go unless escaped.
    while (!line.empty() && line.back() == ' ' && !(line.size() >= 2 && line[line.size() - 2] == '\\')) {
      line.remove_suffix(1);
    }
    if (line.empty() || line.front() == '#') continue;
    bool negated = false;
    if (line.front() == '!') {
      negated = true;
      line.remove_prefix(1);
    } else if (line.size() >= 2 && line[0] == '\\' && (line[1] == '#' || line[1] == '!')) {
      line.remove_prefix(1);
    }
    bool dir_only = false;
    while (!line.empty() && line.back() == '/') {
      dir_only = true;
      line.remove_suffix(1);
    }
    if (line.empty()) continue;
    // A slash at the start or in the middle anchors the pattern to the
    // .gitignore's directory; otherwise it matches at any depth.
    std::string pattern;
    if (line.find('/') == std::string_view::npos) {
      pattern = "**/";
      pattern += line;
    } else {
      while (!line.empty() && line.front() == '/') line.remove_prefix(1);
      pattern = line;
    }
    rules_.push_back(Rule{GlobPattern(pattern), negated, dir_only});
  }
}

std::optional<bool> GitIgnore::match(std::string_view path, bool is_dir) const {
  for (auto it = rules_.rbegin(); it != rules_.rend(); ++it) {
    if (it->dir_only && !is_dir) continue;
    if (it->glob.matches(path)) return !it->negated;
  }
  return std::nullopt;
}

// ---- directory walk ----------------------------------------------------------

namespace {

constexpr int max_walk_depth = 128;

struct IgnoreLevel {
  std::string prefix;  ///< from the .gitignore's directory to the walk's start ("a/b/")
  std::size_t strip;   ///< bytes of the walk-relative path above the .gitignore's directory
  GitIgnore rules;
};

std::optional<GitIgnore> load_gitignore(int dir_fd) {
  UniqueFd fd(::openat(dir_fd, ".gitignore", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) return std::nullopt;
  std::string text;
  if (!read_all(fd.get(), static_cast<std::size_t>(st.st_size), text)) return std::nullopt;
  return GitIgnore(text);
}

class Walker {
 public:
  Walker(const WalkOptions& options, const std::function<bool(const WalkEntry&)>& visit)
      : options_(options), visit_(visit) {}

  std::vector<IgnoreLevel> levels;
  std::string error;
  std::vector<std::string> hidden_rel;  ///< the workspace's hidden directories, relative to the start

  WalkStatus walk(int path_fd, std::string& rel, int depth) {
    if (cancelled()) return WalkStatus::cancelled;
    UniqueFd fd(::openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return depth == 0 ? fail(errno, rel) : WalkStatus::done;  // unreadable subdirectories are skipped
    const std::size_t levels_before = levels.size();
    if (options_.gitignore) {
      if (auto rules = load_gitignore(fd.get())) {
        levels.push_back(IgnoreLevel{{}, rel.empty() ? 0 : rel.size() + 1, std::move(*rules)});
      }
    }
    std::vector<std::pair<std::string, unsigned char>> entries;
    {
      DIR* dir = ::fdopendir(::dup(fd.get()));
      if (!dir) return depth == 0 ? fail(errno, rel) : WalkStatus::done;
      while (const dirent* entry = ::readdir(dir)) {
        const std::string_view name(entry->d_name);
        if (name == "." || name == ".." || name == ".git") continue;
        entries.emplace_back(std::string(name), entry->d_type);
      }
      ::closedir(dir);
    }
    std::sort(entries.begin(), entries.end());
    WalkStatus status = WalkStatus::done;
    for (auto& [name, type] : entries) {
      if ((++visited_ & 255) == 0 && cancelled()) {
        status = WalkStatus::cancelled;
        break;
      }
      if (type == DT_UNKNOWN) {
        struct stat st {};
        if (::fstatat(fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
      }
      if (type != DT_DIR && type != DT_REG) continue;  // symlinks, devices, sockets: never followed
      const std::size_t rel_size = rel.size();
      if (!rel.empty()) rel += '/';
      rel += name;
      const bool is_dir = type == DT_DIR;
      bool keep = !ignored(rel, is_dir);
      if (keep && is_dir && !hidden_rel.empty()) {
        keep = std::find(hidden_rel.begin(), hidden_rel.end(), rel) == hidden_rel.end();
      }
      if (keep && is_dir) {
        keep = depth + 1 < max_walk_depth && (!options_.enter_dir || options_.enter_dir(rel));
        if (keep) {
          UniqueFd child(::openat(fd.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (child) status = walk(child.get(), rel, depth + 1);
        }
      } else if (keep) {
        const WalkEntry entry{fd.get(), name, rel};
        if (!visit_(entry)) status = WalkStatus::stopped;
      }
      rel.resize(rel_size);
      if (status != WalkStatus::done) break;
    }
    levels.erase(levels.begin() + static_cast<std::ptrdiff_t>(levels_before), levels.end());
    return status;
  }

 private:
  bool cancelled() const { return options_.cancel && options_.cancel->cancelled(); }

  WalkStatus fail(int code, const std::string& rel) {
    error = (rel.empty() ? std::string(".") : rel) + ": " + std::strerror(code);
    return WalkStatus::failed;
  }

  bool ignored(const std::string& rel, bool is_dir) const {
    bool result = false;
    for (const IgnoreLevel& level : levels) {
      if (level.strip > rel.size()) continue;
      std::optional<bool> hit;
      if (level.prefix.empty()) {
        hit = level.rules.match(std::string_view(rel).substr(level.strip), is_dir);
      } else {
        hit = level.rules.match(level.prefix + rel.substr(level.strip), is_dir);
      }
      if (hit) result = *hit;
    }
    return result;
  }

  const WalkOptions& options_;
  const std::function<bool(const WalkEntry&)>& visit_;
  std::uint64_t visited_ = 0;
};

}  // namespace

WalkStatus walk_files(const std::filesystem::path& start, const WalkOptions& options,
                      const std::function<bool(const WalkEntry&)>& visit, std::string& error) {
  Walker walker(options, visit);
  if (options.workspace != nullptr) {
    for (const std::filesystem::path& dir : options.workspace->hidden()) {
      const std::filesystem::path rel = dir.lexically_relative(start);
      if (!rel.empty() && *rel.begin() != "..") walker.hidden_rel.push_back(rel.string());
    }
  }
  // The .gitignore files of the directories between the workspace root and
  // the start apply too (as git applies them).
  if (options.gitignore && options.workspace && options.workspace->contains(start)) {
    const std::filesystem::path& root = options.workspace->root();
    const std::filesystem::path below = start.lexically_relative(root);
    std::filesystem::path dir = root;
    std::vector<std::string> parts;
    for (const auto& part : below) {
      if (part.empty() || part == ".") continue;
      parts.push_back(part.string());
    }
    for (std::size_t i = 0; i < parts.size(); ++i) {
      UniqueFd path_fd = open_dir_nofollow(dir, false);
      if (path_fd) {
        UniqueFd fd(::openat(path_fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (fd) {
          if (auto rules = load_gitignore(fd.get())) {
            // A directory ignored on the way is still searched: it was asked for.
            std::string prefix;
            for (std::size_t j = i; j < parts.size(); ++j) prefix += parts[j] + "/";
            walker.levels.push_back(IgnoreLevel{std::move(prefix), 0, std::move(*rules)});
          }
        }
      }
      dir /= parts[i];
    }
  }
  UniqueFd start_fd = open_dir_nofollow(start, false);
  if (!start_fd) {
    error = start.string() + ": " + std::strerror(errno);
    return WalkStatus::failed;
  }
  std::string rel;
  const WalkStatus status = walker.walk(start_fd.get(), rel, 0);
  if (status == WalkStatus::failed) error = walker.error;
  return status;
}

}  // namespace harnessd::tools::files
