// What the daemon knows about models by name: today, each known model's
// context window, the default of a session that sets none (docs/protocol.md
// §13). A provider profile's `models` table overrides it for that profile.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace harnessd::llm {

/// The context window of a model the catalog knows, in tokens, or nullopt.
std::optional<std::int64_t> catalog_context_window(std::string_view model);

}  // namespace harnessd::llm
