#include "tools/registry.hpp"

#include <algorithm>
#include <stdexcept>

namespace harnessd::tools {

void ToolRegistry::add(std::shared_ptr<Tool> tool) {
  const std::string name(tool->name());
  std::lock_guard lock(mutex_);
  if (!tools_.emplace(name, tool).second) throw std::logic_error("two tools named " + name);
  order_.push_back(std::move(tool));
  for (auto& specs : specs_) specs.reset();
}

std::shared_ptr<Tool> ToolRegistry::find(std::string_view name) const {
  std::lock_guard lock(mutex_);
  const auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Tool>> ToolRegistry::all() const {
  std::lock_guard lock(mutex_);
  return order_;
}

std::vector<std::string> ToolRegistry::replace_source(std::string_view source,
                                                      std::vector<std::shared_ptr<Tool>> tools) {
  std::vector<std::string> skipped;
  std::lock_guard lock(mutex_);
  // The new tools go where the source's first old one was, so a server's
  // restart does not reorder what the model is offered.
  auto first = std::find_if(order_.begin(), order_.end(), [&](const auto& tool) { return tool->source() == source; });
  std::size_t at = static_cast<std::size_t>(first - order_.begin());
  std::erase_if(order_, [&](const auto& tool) { return tool->source() == source; });
  std::erase_if(tools_, [&](const auto& entry) { return entry.second->source() == source; });
  at = std::min(at, order_.size());
  std::vector<std::shared_ptr<Tool>> added;
  for (std::shared_ptr<Tool>& tool : tools) {
    const std::string name(tool->name());
    if (!tools_.emplace(name, tool).second) {
      skipped.push_back(name);
      continue;
    }
    added.push_back(std::move(tool));
  }
  order_.insert(order_.begin() + static_cast<std::ptrdiff_t>(at), added.begin(), added.end());
  for (auto& specs : specs_) specs.reset();
  return skipped;
}

std::shared_ptr<const std::vector<llm::ToolSpec>> ToolRegistry::specs(bool may_delegate) const {
  std::lock_guard lock(mutex_);
  std::shared_ptr<const std::vector<llm::ToolSpec>>& cached = specs_[may_delegate ? 1 : 0];
  if (!cached) {
    std::vector<llm::ToolSpec> specs;
    for (const std::shared_ptr<Tool>& tool : order_) {
      if (tool->delegates() && !may_delegate) continue;
      specs.push_back(llm::ToolSpec{std::string(tool->name()), std::string(tool->description()),
                                    tool->input_schema(), std::string(tool->guidance())});
    }
    cached = std::make_shared<const std::vector<llm::ToolSpec>>(std::move(specs));
  }
  return cached;
}

}  // namespace harnessd::tools
