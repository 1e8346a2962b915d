#include "tools/registry.hpp"

#include <stdexcept>

namespace harnessd::tools {

void ToolRegistry::add(std::unique_ptr<Tool> tool) {
  const std::string name(tool->name());
  Tool* raw = tool.get();
  if (!tools_.emplace(name, std::move(tool)).second) throw std::logic_error("two tools named " + name);
  order_.push_back(raw);
}

Tool* ToolRegistry::find(std::string_view name) const {
  const auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : it->second.get();
}

}  // namespace harnessd::tools
