// The tools a session's model is offered, by name. The built-ins are added
// at start-up; MCP servers' tools come, change and go while turns run (a
// server starts late, restarts, or says its list changed), so the registry
// is thread-safe and hands out shared pointers: a tool replaced while one of
// its calls runs stays alive until that call ends.
#pragma once

#include "llm/chat.hpp"
#include "tools/tool.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::tools {

/// Every member is thread-safe.
class ToolRegistry {
 public:
  /// Throws std::logic_error for a second tool of the same name.
  void add(std::shared_ptr<Tool> tool);
  std::shared_ptr<Tool> find(std::string_view name) const;
  /// Every tool, in the order they were added (a source's tools keep the
  /// place of its first list): a snapshot, unchanged by later updates.
  std::vector<std::shared_ptr<Tool>> all() const;

  /// Replaces every tool whose source() is `source` by `tools` (all of
  /// that source). A tool whose name another source already holds is left
  /// out; the names left out are returned, for the caller to log.
  std::vector<std::string> replace_source(std::string_view source, std::vector<std::shared_ptr<Tool>> tools);

  /// What the model is offered: every tool, those that start child
  /// sessions only when `may_delegate`. One snapshot, built once and shared
  /// by every request until the tools change (copying each tool's schema
  /// for every model step was a tenth of the allocations of a turn).
  std::shared_ptr<const std::vector<llm::ToolSpec>> specs(bool may_delegate) const;

 private:
  mutable std::mutex mutex_;
  /// specs(false) and specs(true), built on first use; reset by every change.
  mutable std::shared_ptr<const std::vector<llm::ToolSpec>> specs_[2];
  std::map<std::string, std::shared_ptr<Tool>, std::less<>> tools_;
  std::vector<std::shared_ptr<Tool>> order_;
};

/// The registry with every built-in tool of this file's list: the one
/// place a new tool is registered.
void add_builtin_tools(ToolRegistry& registry, const SandboxOptions& options);

}  // namespace harnessd::tools
