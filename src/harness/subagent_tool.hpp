// The `subagent` tool: a prompt run as a child session's turn. It lives in
// the harness layer because children are sessions; the turn hands it the
// way to start one through ToolContext::delegate.
#pragma once

#include "tools/tool.hpp"

#include <memory>

namespace harnessd::harness {

std::unique_ptr<tools::Tool> make_subagent_tool();

}  // namespace harnessd::harness
