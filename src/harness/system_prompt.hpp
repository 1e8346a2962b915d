// The system prompt of a session's requests: the daemon's identity, then a
// persona (a template with {{model}} and {{cwd}}: --system-prompt or
// --system-prompt-file), then the guidance of each offered tool, in the
// order the tools are offered (docs/protocol.md §13.2).
#pragma once

#include "llm/chat.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace harnessd::harness {

inline constexpr std::string_view default_persona =
    "You work with the model {{model}} in the directory {{cwd}}. Be concise and exact: read before you change, "
    "change only what the task needs, and check your work (run the tests when there are any) before you say it "
    "is done.";

/// `persona` with {{model}} and {{cwd}} replaced.
std::string expand_persona(std::string_view persona, std::string_view model, std::string_view cwd);

std::string build_system_prompt(std::string_view persona, std::string_view model, std::string_view cwd,
                                const std::vector<llm::ToolSpec>& tools);

}  // namespace harnessd::harness
