// The AGENTS.md chains turns have read, kept while inotify says nothing in
// them changed. Every turn must see the chain as it is when it starts
// (docs/protocol.md §13.1), and reading it is blocking file I/O, so it
// runs on the setup thread: a hop to another thread and back, and on a
// busy core a wait for the scheduler to run that thread. With the chain
// cached, a turn asks the inotify queue instead: one non-blocking read(2).
//
// Correct because each directory is watched before the chain is read, and
// the queue is drained before every lookup: a change made before a prompt
// arrived is in the queue by then. Only chains under a given workspace
// root are cached (finding the root otherwise walks the file system), and
// only when every directory of the chain could be watched, on a local file
// system (inotify sees no change another machine makes on NFS).
#pragma once

#include "harness/workspace_instructions.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace harnessd::harness {

/// Thread-safe.
class InstructionCache {
 public:
  InstructionCache();
  ~InstructionCache();
  InstructionCache(const InstructionCache&) = delete;
  InstructionCache& operator=(const InstructionCache&) = delete;

  /// The chain from `root` to `cwd` as last read, if nothing in it has
  /// changed since. Never blocks (an I/O thread may ask).
  std::optional<std::vector<InstructionFile>> find(const std::filesystem::path& root,
                                                   const std::filesystem::path& cwd);

  /// Reads the chain (blocking: the setup thread), watching its
  /// directories first, and remembers it when they could all be watched.
  std::vector<InstructionFile> read(const std::filesystem::path& root, const std::filesystem::path& cwd);

 private:
  struct Watch {
    std::uint64_t changes = 0;
    /// Names whose events matter: AGENTS.md, and each chain's next directory.
    std::vector<std::string> names;
  };
  struct Entry {
    std::vector<InstructionFile> files;
    std::vector<std::pair<int, std::uint64_t>> seen;  ///< each watch and its changes when read
  };

  void drain_locked();
  /// Watches `dir` (file system calls: never under the lock); -errno when
  /// it cannot be watched (-EXDEV: not a local file system).
  int add_watch(const std::string& dir) const;
  /// Records watch `wd` and its count of changes in `entry`; false past
  /// the cap of watches.
  bool remember_locked(int wd, const std::string& next_name, Entry& entry);
  bool unchanged_locked(const Entry& entry) const;

  int fd_ = -1;
  mutable std::mutex mutex_;
  std::map<int, Watch> watches_;
  std::map<std::string, Entry, std::less<>> entries_;  ///< by root + '\0' + cwd
};

}  // namespace harnessd::harness
