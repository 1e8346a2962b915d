#include "llm/provider.hpp"

namespace harnessd::llm {

void ProviderRegistry::add(std::shared_ptr<Provider> provider) {
  std::string name(provider->name());
  providers_[std::move(name)] = std::move(provider);
}

Provider* ProviderRegistry::find(std::string_view name) const {
  auto it = providers_.find(name);
  return it == providers_.end() ? nullptr : it->second.get();
}

std::vector<std::string> ProviderRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, provider] : providers_) out.push_back(name);
  return out;
}

}  // namespace harnessd::llm
