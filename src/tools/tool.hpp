// The one interface every tool of the agent implements (read, bash,
// subagent, an MCP server's tool...). A tool is a unit: its name, its model
// facing description, its JSON schema, whether it only reads, and a
// coroutine that runs one call. The turn loop knows tools only through the
// ToolRegistry, so adding a tool is one file and one registry line.
#pragma once

#include "tools/tool_context.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace harnessd::tools {

/// A failed call, as the model and clients see it: `error.code` names the
/// kind (PATH_OUTSIDE_WORKSPACE, NOT_FOUND, ...), the message says what to do.
struct ToolError {
  std::string code;
  std::string message;
};

/// What one call produced: the text the model reads, an error when it
/// failed, and structured extras for clients (`meta.diff`, `meta.exitCode`).
struct ToolResult {
  std::string text;
  std::optional<ToolError> error;
  boost::json::object meta;

  static ToolResult failure(std::string code, std::string message) {
    ToolResult result;
    result.text = message;
    result.error = ToolError{std::move(code), std::move(message)};
    return result;
  }
};

class Tool {
 public:
  virtual ~Tool() = default;

  virtual std::string_view name() const = 0;
  /// How a model should use the tool well; sent to the model as is.
  virtual std::string_view description() const = 0;
  /// JSON Schema of the arguments object.
  virtual const boost::json::object& input_schema() const = 0;
  /// How to use the tool well beyond its description: the tool's section of
  /// the system prompt (empty: none).
  virtual std::string_view guidance() const { return {}; }
  /// Read-only tools of one step run in parallel and never ask for approval.
  virtual bool read_only() const = 0;
  /// Under the `ask` approval policy, whether a call waits for a client's
  /// approval. Every tool that may change something does, except those
  /// whose effect stays inside the session (a todo list, a question to the
  /// user, a child session whose own calls ask for themselves).
  virtual bool asks_approval() const { return !read_only(); }
  /// "builtin", or "mcp:SERVER".
  virtual std::string_view source() const { return "builtin"; }
  /// Starts child sessions (subagent): offered only below the delegation
  /// depth limit.
  virtual bool delegates() const { return false; }

  /// Runs one call on the session's strand. `args` is an object whose
  /// required fields (the schema's "required") are present. Blocking work
  /// goes to context.pool; a cancelled turn (context.cancel) returns soon
  /// with code CANCELLED. Expected failures are results, never exceptions.
  virtual boost::asio::awaitable<ToolResult> run(const boost::json::object& args, ToolContext& context) = 0;
};

}  // namespace harnessd::tools
