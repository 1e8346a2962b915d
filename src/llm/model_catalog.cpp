#include "llm/model_catalog.hpp"

#include <array>
#include <utility>

namespace harnessd::llm {

namespace {

// DeepSeek's published windows: the V4 models take 256k tokens, the
// current deepseek-chat and deepseek-reasoner aliases 128k.
constexpr std::array<std::pair<std::string_view, std::int64_t>, 4> known_models{{
    {"deepseek-v4-flash", 256'000},
    {"deepseek-v4-pro", 256'000},
    {"deepseek-chat", 128'000},
    {"deepseek-reasoner", 128'000},
}};

}  // namespace

std::optional<std::int64_t> catalog_context_window(std::string_view model) {
  for (const auto& [name, window] : known_models) {
    if (name == model) return window;
  }
  return std::nullopt;
}

}  // namespace harnessd::llm
