// A session's workspace: the directory its tools work in, and the sandbox
// mode that says how far they may reach beyond it (docs/protocol.md §12).
// Paths from the model are resolved here, symlinks followed, and refused
// when they leave the workspace.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <vector>

namespace harnessd::tools {

enum class SandboxMode { read_only, workspace_write, danger_full_access };

std::optional<SandboxMode> parse_sandbox_mode(std::string_view name);
std::string_view to_string(SandboxMode mode);

/// The daemon's settings for confined processes (bash).
struct SandboxOptions {
  bool network = false;       ///< --sandbox-network on: bash may use the network
  std::string bwrap = "bwrap";  ///< the bubblewrap binary
  std::uint64_t max_file_bytes = std::uint64_t{1} << 30;  ///< RLIMIT_FSIZE
  std::uint64_t max_processes = 256;                       ///< RLIMIT_NPROC (per sandbox user)
  std::uint64_t max_memory_bytes = std::uint64_t{4} << 30;  ///< RLIMIT_AS
  /// Directories bash must not see (the session root, the workspace root of
  /// every session): each is covered by an empty tmpfs, and the session's
  /// own workspace is bound back on top.
  std::vector<std::string> hidden_paths;
  bool web_fetch = false;               ///< --web-fetch on
  bool web_fetch_allow_private = false;  ///< --web-fetch-allow-private
};

class Workspace {
 public:
  /// `root` must exist; it is made canonical (symlinks resolved).
  /// `unconfined`: danger-full-access, paths may leave the root.
  /// `hidden`: the daemon's own directories (its session root, the root of
  /// every workspace); those inside this workspace are out of reach too.
  Workspace(const std::filesystem::path& root, bool unconfined, const std::vector<std::string>& hidden = {});

  const std::filesystem::path& root() const noexcept { return root_; }
  bool unconfined() const noexcept { return unconfined_; }

  struct Resolved {
    std::filesystem::path path;  ///< absolute, symlinks of the existing part resolved
    std::string error;           ///< set (PATH_OUTSIDE_WORKSPACE's message) when refused
  };
  /// `path` absolute or relative to the root. Symlinks are followed as far
  /// as the path exists; the result must be the root or inside it.
  Resolved resolve(std::string_view path) const;

  /// `path` relative to the root for display ("." for the root); absolute
  /// when outside.
  std::string display(const std::filesystem::path& path) const;

  /// Whether `path` (canonical) is the root or inside it.
  bool contains(const std::filesystem::path& path) const;

  /// The daemon's directories inside this workspace (canonical), which the
  /// tools neither read nor list: another session's log is not the model's.
  const std::vector<std::filesystem::path>& hidden() const noexcept { return hidden_; }
  /// Whether `path` (canonical) is one of hidden() or inside one.
  bool is_hidden(const std::filesystem::path& path) const;

 private:
  static bool within(const std::filesystem::path& base, const std::filesystem::path& path);

  std::filesystem::path root_;
  bool unconfined_;
  std::vector<std::filesystem::path> hidden_;
};

}  // namespace harnessd::tools
