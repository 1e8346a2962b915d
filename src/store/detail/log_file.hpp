// An open session log file, shared by its SessionLog and any sync round
// that still has to make it durable, so the descriptor outlives both.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace harnessd::store::detail {

struct LogFile {
  /// Takes ownership of `fd`; `open_count` counts the store's open files.
  LogFile(int fd, std::string path, bool created, std::atomic<std::size_t>& open_count);
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  const int fd;
  const std::string path;
  /// The file was created by this open: its directory entry is not durable
  /// until the directory is synced too.
  std::atomic<bool> created;

 private:
  std::atomic<std::size_t>& open_count_;
};

}  // namespace harnessd::store::detail
