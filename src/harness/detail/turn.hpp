// The turn loop: turn/start, user/message, model steps with their chunks and
// tool calls, turn/end. Internal to the harness layer.
#pragma once

#include "harness/session.hpp"

namespace harnessd::harness::detail {

/// Runs one turn of `session` on its strand; the session is already marked
/// busy and `cancel` is registered as its running scope.
boost::asio::awaitable<PromptOutcome> run_turn(Session& session, PromptInput& input,
                                               EventSink& sink, llm::CancelScope& cancel);

struct ToolOutcome {
  std::string text;
  bool is_error = false;
};

/// The `subagent` tool (protocol §8): runs `call` as a child session's turn.
boost::asio::awaitable<ToolOutcome> run_subagent(Session& parent, const llm::ToolCall& call,
                                                 const PromptInput& parent_input, EventSink& sink,
                                                 llm::CancelScope& cancel);

/// The tool definitions offered to the model in a session at `depth`.
std::vector<llm::ToolSpec> tools_for_depth(int depth, int max_depth);

}  // namespace harnessd::harness::detail
