// The tools a session's model is offered, by name. Built once at start-up
// (the built-ins; MCP servers' tools join as they are listed) and read-only
// while turns run.
#pragma once

#include "tools/tool.hpp"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::tools {

class ToolRegistry {
 public:
  /// Throws std::logic_error for a second tool of the same name.
  void add(std::unique_ptr<Tool> tool);
  Tool* find(std::string_view name) const;
  /// Every tool, in the order they were added.
  const std::vector<Tool*>& all() const noexcept { return order_; }

 private:
  std::map<std::string, std::unique_ptr<Tool>, std::less<>> tools_;
  std::vector<Tool*> order_;
};

/// The registry with every built-in tool of this file's list: the one
/// place a new tool is registered.
void add_builtin_tools(ToolRegistry& registry, const SandboxOptions& options);

}  // namespace harnessd::tools
