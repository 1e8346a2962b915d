#include "tools/workspace.hpp"

#include <system_error>

namespace harnessd::tools {

std::optional<SandboxMode> parse_sandbox_mode(std::string_view name) {
  if (name == "read-only") return SandboxMode::read_only;
  if (name == "workspace-write") return SandboxMode::workspace_write;
  if (name == "danger-full-access") return SandboxMode::danger_full_access;
  return std::nullopt;
}

std::string_view to_string(SandboxMode mode) {
  switch (mode) {
    case SandboxMode::read_only: return "read-only";
    case SandboxMode::workspace_write: return "workspace-write";
    case SandboxMode::danger_full_access: return "danger-full-access";
  }
  return "workspace-write";
}

Workspace::Workspace(const std::filesystem::path& root, bool unconfined)
    : root_(std::filesystem::canonical(root)), unconfined_(unconfined) {}

bool Workspace::contains(const std::filesystem::path& path) const {
  // Component-wise: /work/a is not inside /work/ab.
  auto p = path.begin();
  for (auto r = root_.begin(); r != root_.end(); ++r, ++p) {
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

Workspace::Resolved Workspace::resolve(std::string_view path) const {
  std::filesystem::path requested(path);
  if (requested.is_relative()) requested = root_ / requested;
  std::error_code ec;
  // Follows every symlink of the part that exists, so a link planted inside
  // the workspace cannot lead a later write outside it.
  std::filesystem::path resolved = std::filesystem::weakly_canonical(requested, ec);
  if (ec) return Resolved{{}, "cannot resolve " + std::string(path) + ": " + ec.message()};
  if (!unconfined_ && !contains(resolved)) {
    return Resolved{{}, std::string(path) + " is outside the workspace " + root_.string()};
  }
  return Resolved{std::move(resolved), {}};
}

std::string Workspace::display(const std::filesystem::path& path) const {
  if (!contains(path)) return path.string();
  std::filesystem::path relative = path.lexically_relative(root_);
  return relative.empty() ? "." : relative.string();
}

}  // namespace harnessd::tools
