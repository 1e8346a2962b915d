// A file's version as the read-before-write rule compares it: stat's
// modification time and size, made the same way as the file tools make it
// from an open descriptor (files::stamp_from_stat), so the two compare equal.
#include "tools/read_tracker.hpp"

#include "tools/file_util.hpp"

#include <sys/stat.h>

namespace harnessd::tools {

std::optional<FileStamp> stamp_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return files::stamp_from_stat(st);
}

}  // namespace harnessd::tools
