#include "harness/instruction_cache.hpp"

#include <sys/inotify.h>
#include <sys/vfs.h>
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

/// Whether inotify sees every change of `dir`: not so on a network file
/// system (NFS, SMB, FUSE, ...), where another machine's writes make no
/// event here. Only the local file systems below are trusted.
bool local_file_system(const std::string& dir) {
  struct statfs info {};
  if (::statfs(dir.c_str(), &info) != 0) return false;
  switch (static_cast<unsigned long>(info.f_type)) {
    case 0xEF53:      // ext2, ext3, ext4
    case 0x58465342:  // xfs
    case 0x9123683E:  // btrfs
    case 0x01021994:  // tmpfs
    case 0x794C7630:  // overlayfs
    case 0x2FC12FC1:  // zfs
    case 0xF2F52010:  // f2fs
      return true;
    default:
      return false;
  }
}

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

int InstructionCache::add_watch(const std::string& dir) const {
  if (!local_file_system(dir)) return fs::exists(dir) ? -EXDEV : -ENOENT;
  const int wd = ::inotify_add_watch(fd_, dir.c_str(), watch_mask);
  return wd >= 0 ? wd : -errno;
}

bool InstructionCache::remember_locked(int wd, const std::string& next_name, Entry& entry) {
  auto it = watches_.find(wd);
  if (it == watches_.end()) {
    if (watches_.size() >= max_watches) {
      ::inotify_rm_watch(fd_, wd);
      return false;
    }
    // The kernel hands out one wd per inode: two paths of one directory
    // (a bind mount) share it.
    it = watches_.emplace(wd, Watch{0, {std::string(file_name)}}).first;
  }
  std::vector<std::string>& names = it->second.names;
  if (!next_name.empty() && std::find(names.begin(), names.end(), next_name) == names.end()) {
    names.push_back(next_name);
  }
  entry.seen.emplace_back(wd, it->second.changes);
  return true;
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
  // Watched first (file system calls, outside the lock: an I/O thread may
  // wait for it), then remembered with their change counts, then read.
  struct Planned {
    int wd;
    std::string next;  ///< the name below it on the way to cwd
  };
  std::vector<Planned> planned;
  bool watched = !dirs.empty() && dirs.front() == root;
  for (std::size_t i = 0; watched && i < dirs.size(); ++i) {
    std::string next = i + 1 < dirs.size() ? dirs[i + 1].filename().string() : std::string();
    const int wd = add_watch(dirs[i].string());
    if (wd >= 0) {
      planned.push_back({wd, std::move(next)});
      continue;
    }
    // A directory not made yet: the watch above it sees it appear (its
    // name is among that watch's names), and nothing below it exists. For
    // the root itself, that is the nearest directory above it that exists.
    watched = wd == -ENOENT;
    if (watched && i == 0) {
      watched = false;
      fs::path child = root;
      for (fs::path dir = root.parent_path(); !dir.empty(); child = dir, dir = dir.parent_path()) {
        const int above = add_watch(dir.string());
        if (above >= 0) {
          planned.push_back({above, child.filename().string()});
          watched = true;
        }
        if (above != -ENOENT || dir == dir.root_path()) break;
      }
    }
    break;
  }
  Entry entry;
  if (watched) {
    std::lock_guard lock(mutex_);
    drain_locked();
    for (const Planned& plan : planned) watched = watched && remember_locked(plan.wd, plan.next, entry);
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
