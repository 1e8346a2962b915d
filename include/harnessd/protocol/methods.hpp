// The protocol's methods (docs/protocol.md §4), named once: the daemon's
// method table, its capabilities and its metrics labels all come from here.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace harnessd::protocol {

enum class Method : std::size_t {
  initialize,
  session_prompt,
  session_cancel,
  shutdown,
  session_list,
  session_events,
  session_subscribe,
  session_unsubscribe,
  tools_list,
  session_approve,
  session_answer,
  session_delete,
};

inline constexpr std::array<std::string_view, 12> method_names = {
    "initialize",     "session/prompt",    "session/cancel",      "shutdown",   "session/list",
    "session/events", "session/subscribe", "session/unsubscribe", "tools/list", "session/approve",
    "session/answer", "session/delete"};

constexpr std::string_view name_of(Method method) { return method_names[static_cast<std::size_t>(method)]; }

constexpr std::optional<Method> find_method(std::string_view name) {
  for (std::size_t i = 0; i < method_names.size(); ++i) {
    if (method_names[i] == name) return static_cast<Method>(i);
  }
  return std::nullopt;
}

}  // namespace harnessd::protocol
