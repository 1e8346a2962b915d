// Workspace instructions: the AGENTS.md files from the workspace root down to
// a session's directory, which every request carries ahead of the
// conversation (docs/protocol.md §13.1).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace harnessd::harness {

struct InstructionFile {
  std::string path;     ///< absolute
  std::string content;  ///< valid UTF-8, at most max_instruction_bytes
};

inline constexpr std::size_t max_instruction_bytes = 64 * 1024;

/// Whether `dir` is `root` or below it (by path components, no file system access).
bool is_within(const std::filesystem::path& dir, const std::filesystem::path& root);

/// Where the chain starts for a session working in `cwd`: `root` when given
/// (a network client's workspace root) and `cwd` is inside it; else the
/// nearest directory at or above `cwd` that holds `.git`; else `cwd`.
std::filesystem::path instructions_root(const std::filesystem::path& cwd,
                                        const std::optional<std::filesystem::path>& root);

/// The AGENTS.md files of each directory from `root` down to `cwd`, in
/// that order. Blocking (run it on the tool pool). Symbolic links are not
/// followed: a link could name any file of the machine.
std::vector<InstructionFile> read_instruction_chain(const std::filesystem::path& root,
                                                    const std::filesystem::path& cwd);

/// The chain as the text of the user message sent ahead of the first one;
/// "" for no files.
std::string instructions_text(const std::vector<InstructionFile>& files);

}  // namespace harnessd::harness
