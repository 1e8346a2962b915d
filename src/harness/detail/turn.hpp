// The turn loop: turn/start, user/message, model steps with their chunks and
// tool calls, turn/end. Internal to the harness layer.
#pragma once

#include "harness/session.hpp"
#include "tools/registry.hpp"
#include "tools/tool.hpp"

namespace harnessd::harness::detail {

/// Runs one turn of `session` on its strand; the session is already marked
/// busy and `cancel` is registered as its running scope.
boost::asio::awaitable<PromptOutcome> run_turn(Session& session, PromptInput& input,
                                               EventSink& sink, llm::CancelScope& cancel);

/// The `subagent` tool's work (protocol §8): runs `prompt` as a child
/// session's turn.
boost::asio::awaitable<tools::ToolResult> run_subagent(Session& parent, std::string prompt,
                                                       const PromptInput& parent_input, EventSink& sink,
                                                       llm::CancelScope& cancel);

}  // namespace harnessd::harness::detail
