// What a running tool may use: its session's workspace and sandbox mode, the
// turn's cancellation, the pool for blocking work, the session's record of
// what it has read, its background tasks, and a way to log an event. Built
// by the turn loop for each call; everything here lives at least as long as
// the call.
#pragma once

#include "tools/workspace.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <functional>
#include <string>
#include <string_view>

namespace harnessd::llm {
class CancelScope;
}

namespace harnessd::tools {

class ToolPool;
class ReadTracker;
class TaskTable;
struct ToolResult;

struct ToolContext {
  const Workspace& workspace;
  SandboxMode sandbox;
  llm::CancelScope& cancel;
  ToolPool& pool;
  ReadTracker& reads;  ///< what this session has read, for write/edit's read-before-write rule
  TaskTable& tasks;    ///< this session's background processes
  /// Logs and streams one more event of the turn (e.g. `todo/write`).
  std::function<void(std::string_view type, boost::json::object data)> emit;
  /// Runs a prompt as a child session's turn (the subagent tool); unset
  /// where delegation is not allowed.
  std::function<boost::asio::awaitable<ToolResult>(std::string description, std::string prompt)> delegate;
  /// The daemon's sandbox settings (--sandbox-network and the like).
  const SandboxOptions& sandbox_options;
  /// Puts questions (ask_user_question's validated `questions`) to the
  /// session's clients and waits for their answers, the timeout or the
  /// turn's cancel; the result is what the tool returns.
  std::function<boost::asio::awaitable<ToolResult>(const boost::json::array& questions)> ask_user;
};

}  // namespace harnessd::tools
