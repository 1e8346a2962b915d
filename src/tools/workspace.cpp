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

Workspace::Workspace(const std::filesystem::path& root, bool unconfined, const std::vector<std::string>& hidden)
    : root_(std::filesystem::canonical(root)), unconfined_(unconfined) {
  for (const std::string& dir : hidden) {
    std::error_code ec;
    const std::filesystem::path canonical = std::filesystem::weakly_canonical(dir, ec);
    // Only what lies inside this workspace; never the workspace itself or a
    // directory that holds it (the session's own workspace stays its own).
    if (!ec && within(root_, canonical) && !within(canonical, root_)) hidden_.push_back(canonical);
  }
}

bool Workspace::within(const std::filesystem::path& base, const std::filesystem::path& path) {
  // Component-wise: /work/a is not inside /work/ab.
  auto p = path.begin();
  for (auto b = base.begin(); b != base.end(); ++b, ++p) {
    if (p == path.end() || *p != *b) return false;
  }
  return true;
}

bool Workspace::contains(const std::filesystem::path& path) const { return within(root_, path); }

bool Workspace::is_hidden(const std::filesystem::path& path) const {
  for (const std::filesystem::path& dir : hidden_) {
    if (within(dir, path)) return true;
  }
  return false;
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
  if (!unconfined_ && is_hidden(resolved)) {
    return Resolved{{}, std::string(path) + " is the daemon's own data, not part of the workspace"};
  }
  return Resolved{std::move(resolved), {}};
}

std::string Workspace::display(const std::filesystem::path& path) const {
  if (!contains(path)) return path.string();
  std::filesystem::path relative = path.lexically_relative(root_);
  return relative.empty() ? "." : relative.string();
}

}  // namespace harnessd::tools
