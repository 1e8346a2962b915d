#include "harness/instruction_cache.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace harnessd::harness {
namespace fs = std::filesystem;

namespace {

// Past these, chains are read every turn as without the cache.
constexpr std::size_t max_watches = 1024;
constexpr std::size_t max_entries = 4096;

constexpr std::uint32_t watch_mask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM |
                                     IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR |
                                     IN_DONT_FOLLOW;

constexpr std::string_view file_name = "AGENTS.md";

std::string key_of(const fs::path& root, const fs::path& cwd) {
  std::string key = root.string();
  key += '\0';
  key += cwd.string();
  return key;
}

}  // namespace

InstructionCache::InstructionCache() : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {}

InstructionCache::~InstructionCache() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t InstructionCache::watches() const {
  std::lock_guard lock(mutex_);
  return watches_.size();
}

void InstructionCache::drain_locked() {
  alignas(inotify_event) char buffer[16 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n <= 0) return;  // EAGAIN: the queue is empty
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if ((event->mask & IN_Q_OVERFLOW) != 0) {
        for (auto& [wd, watch] : watches_) ++watch.changes;
        continue;
      }
      const auto it = watches_.find(event->wd);
      if (it == watches_.end()) continue;
      Watch& watch = it->second;
      if ((event->mask & IN_IGNORED) != 0) {
        // The directory is gone (or unmounted): entries that used it fail.
        by_dir_.erase(watch.dir);
        watches_.erase(it);
        continue;
      }
      const std::string_view name = event->len > 0 ? std::string_view(event->name) : std::string_view();
      if (name.empty() || std::find(watch.names.begin(), watch.names.end(), name) != watch.names.end()) {
        ++watch.changes;
      }
    }
  }
}

int InstructionCache::watch_locked(const std::string& dir, const std::string& next_name) {
  int wd = -1;
  if (const auto it = by_dir_.find(dir); it != by_dir_.end()) {
    wd = it->second;
  } else {
    if (watches_.size() >= max_watches) return -ENOSPC;
    wd = ::inotify_add_watch(fd_, dir.c_str(), watch_mask);
    if (wd < 0) return -errno;
    // The kernel hands out one wd per inode: two paths of one directory
    // (a bind mount) share it.
    Watch& watch = watches_[wd];
    if (watch.dir.empty()) {
      watch.dir = dir;
      watch.names.emplace_back(file_name);
    }
    by_dir_[dir] = wd;
  }
  std::vector<std::string>& names = watches_[wd].names;
  if (!next_name.empty() && std::find(names.begin(), names.end(), next_name) == names.end()) {
    names.push_back(next_name);
  }
  return wd;
}

bool InstructionCache::watch_ancestor_locked(const fs::path& root, Entry& entry) {
  fs::path child = root;
  for (fs::path dir = root.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    const int wd = watch_locked(dir.string(), child.filename().string());
    if (wd >= 0) {
      entry.seen.emplace_back(wd, watches_[wd].changes);
      return true;
    }
    if (wd != -ENOENT || dir == dir.root_path()) return false;
    child = dir;
  }
  return false;
}

bool InstructionCache::unchanged_locked(const Entry& entry) const {
  for (const auto& [wd, changes] : entry.seen) {
    const auto it = watches_.find(wd);
    if (it == watches_.end() || it->second.changes != changes) return false;
  }
  return true;
}

std::optional<std::vector<InstructionFile>> InstructionCache::find(const fs::path& root, const fs::path& cwd) {
  if (fd_ < 0) return std::nullopt;
  std::lock_guard lock(mutex_);
  drain_locked();
  const auto it = entries_.find(key_of(root, cwd));
  if (it == entries_.end()) return std::nullopt;
  if (!unchanged_locked(it->second)) {
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.files;
}

std::vector<InstructionFile> InstructionCache::read(const fs::path& root, const fs::path& cwd) {
  if (fd_ < 0) return read_instruction_chain(root, cwd);
  // The chain's directories, root first, as read_instruction_chain walks them.
  std::vector<fs::path> dirs;
  for (fs::path dir = cwd; is_within(dir, root); dir = dir.parent_path()) {
    dirs.push_back(dir);
    if (dir == root || dir == dir.root_path()) break;
  }
  std::reverse(dirs.begin(), dirs.end());
  Entry entry;
  bool watched = !dirs.empty() && dirs.front() == root;
  {
    std::lock_guard lock(mutex_);
    drain_locked();
    for (std::size_t i = 0; watched && i < dirs.size(); ++i) {
      const std::string next = i + 1 < dirs.size() ? dirs[i + 1].filename().string() : std::string();
      const int wd = watch_locked(dirs[i].string(), next);
      if (wd >= 0) {
        entry.seen.emplace_back(wd, watches_[wd].changes);
        continue;
      }
      // A directory not made yet: the watch above it sees it appear (its
      // name is among that watch's names), and nothing below it exists.
      watched = wd == -ENOENT && (i > 0 || watch_ancestor_locked(root, entry));
      break;
    }
  }
  entry.files = read_instruction_chain(root, cwd);
  if (watched) {
    std::lock_guard lock(mutex_);
    if (entries_.size() >= max_entries) entries_.clear();
    entries_[key_of(root, cwd)] = entry;
  }
  return std::move(entry.files);
}

}  // namespace harnessd::harness
