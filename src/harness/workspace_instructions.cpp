#include "harness/workspace_instructions.hpp"

#include "util/utf8.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace harnessd::harness {
namespace fs = std::filesystem;

namespace {

/// The file's bytes, at most max_instruction_bytes (and a note when cut);
/// nullopt when it is missing, not a regular file, or a link.
std::optional<std::string> read_regular_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> content;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    std::string bytes(max_instruction_bytes, '\0');
    std::size_t size = 0;
    while (size < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + size, bytes.size() - size);
      if (n <= 0) break;
      size += static_cast<std::size_t>(n);
    }
    bytes.resize(size);
    if (static_cast<std::uintmax_t>(st.st_size) > size) bytes += "\n[cut at 64 KiB]";
    content = util::valid_utf8(bytes);
  }
  ::close(fd);
  return content;
}

}  // namespace

bool is_within(const fs::path& dir, const fs::path& root) {
  auto d = dir.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++d) {
    if (d == dir.end() || *d != *r) return false;
  }
  return true;
}

fs::path instructions_root(const fs::path& cwd, const std::optional<fs::path>& root) {
  if (root && is_within(cwd, *root)) return *root;
  std::error_code ec;
  for (fs::path dir = cwd; !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / ".git", ec)) return dir;
    if (dir == dir.root_path()) break;
  }
  return cwd;
}

std::vector<InstructionFile> read_instruction_chain(const fs::path& root, const fs::path& cwd) {
  std::vector<fs::path> dirs;
  for (fs::path dir = cwd; is_within(dir, root); dir = dir.parent_path()) {
    dirs.push_back(dir);
    if (dir == root || dir == dir.root_path()) break;
  }
  std::vector<InstructionFile> files;
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    const fs::path path = *it / "AGENTS.md";
    if (std::optional<std::string> content = read_regular_file(path)) {
      files.push_back(InstructionFile{path.string(), std::move(*content)});
    }
  }
  return files;
}

std::string instructions_text(const std::vector<InstructionFile>& files) {
  if (files.empty()) return {};
  std::string text = "<workspace-instructions>\n";
  for (const InstructionFile& file : files) {
    text += "# " + file.path + "\n" + file.content;
    if (!file.content.empty() && file.content.back() != '\n') text += '\n';
  }
  text += "</workspace-instructions>";
  return text;
}

}  // namespace harnessd::harness
