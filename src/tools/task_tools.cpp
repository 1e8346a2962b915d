// task_output, task_list and task_kill: how a model reads, lists and stops
// the background tasks bash started (run_in_background), in this turn or an
// earlier one of the session.
#include "tools/builtin.hpp"
#include "tools/task_table.hpp"
#include "tools/tool_pool.hpp"

#include "llm/cancel_scope.hpp"
#include "util/utf8.hpp"

#include <boost/json/array.hpp>

#include <ctime>
#include <fstream>

namespace harnessd::tools {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr std::size_t task_output_shown = 64 * 1024;
constexpr std::int64_t task_default_wait_ms = 30000;
constexpr std::int64_t task_max_wait_ms = 600000;

std::string task_iso_time(std::chrono::system_clock::time_point when) {
  const std::time_t t = std::chrono::system_clock::to_time_t(when);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::string task_state_line(const TaskInfo& info) {
  std::string line = "[" + info.id + ": " + std::string(to_string(info.state));
  if (info.state == TaskState::killed && !info.kill_reason.empty()) line += " (" + info.kill_reason + ")";
  if (info.exit_code) line += ", exit code " + std::to_string(*info.exit_code);
  line += "]";
  return line;
}

json::object task_meta(const TaskInfo& info) {
  json::object meta{{"taskId", info.id},
                    {"command", info.command},
                    {"description", info.description},
                    {"state", to_string(info.state)},
                    {"started", task_iso_time(info.started)}};
  if (info.exit_code) meta["exitCode"] = *info.exit_code;
  if (!info.kill_reason.empty()) meta["killReason"] = info.kill_reason;
  return meta;
}

/// The `task_id` argument, or an error message.
std::string task_id_arg(const json::object& args, std::string_view tool, std::string& error) {
  const json::value* id = args.if_contains("task_id");
  if (id == nullptr || !id->is_string() || id->get_string().empty()) {
    error = std::string(tool) + ": \"task_id\" must be a non-empty string";
    return {};
  }
  return std::string(id->get_string());
}

ToolResult task_not_found(std::string_view tool, const std::string& id) {
  return ToolResult::failure("TASK_NOT_FOUND", std::string(tool) + ": no task " + id +
                                                   " in this session (task_list shows them)");
}

class TaskOutputTool final : public Tool {
 public:
  std::string_view name() const override { return "task_output"; }
  std::string_view description() const override {
    return "Returns the output so far (stdout and stderr together) of a background task started with bash "
           "run_in_background, and its state: running, exited (with its exit code) or killed. With wait: true "
           "it first waits until the task ends or timeout_ms passes (default 30000, at most 600000). Shows the "
           "last 64 KiB; the whole output is in the file named in the result.";
  }
  const json::object& input_schema() const override {
    static const json::object schema{
        {"type", "object"},
        {"properties",
         json::object{{"task_id", json::object{{"type", "string"}, {"description", "The id bash returned"}}},
                      {"wait", json::object{{"type", "boolean"}, {"description", "Wait for the task to end first"}}},
                      {"timeout_ms",
                       json::object{{"type", "integer"},
                                    {"description", "How long to wait, in milliseconds (default 30000, at most 600000)"},
                                    {"minimum", 0},
                                    {"maximum", task_max_wait_ms}}}}},
        {"required", json::array{"task_id"}}};
    return schema;
  }
  bool read_only() const override { return true; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    std::string error;
    const std::string id = task_id_arg(args, "task_output", error);
    if (!error.empty()) co_return ToolResult::failure("INVALID_ARGUMENTS", error);
    bool wait = false;
    if (const json::value* w = args.if_contains("wait"); w != nullptr && !w->is_null()) {
      if (!w->is_bool()) co_return ToolResult::failure("INVALID_ARGUMENTS", "task_output: \"wait\" must be a boolean");
      wait = w->get_bool();
    }
    std::int64_t timeout_ms = task_default_wait_ms;
    if (const json::value* t = args.if_contains("timeout_ms"); t != nullptr && !t->is_null()) {
      if (t->is_int64()) timeout_ms = t->get_int64();
      else if (t->is_uint64()) timeout_ms = task_max_wait_ms;
      else if (t->is_double()) timeout_ms = static_cast<std::int64_t>(t->get_double());
      else co_return ToolResult::failure("INVALID_ARGUMENTS", "task_output: \"timeout_ms\" must be a number");
      timeout_ms = std::clamp<std::int64_t>(timeout_ms, 0, task_max_wait_ms);
    }
    if (!context.tasks.info(id)) co_return task_not_found("task_output", id);
    if (wait) {
      co_await context.tasks.wait(id, std::chrono::milliseconds(timeout_ms), context.cancel);
      if (context.cancel.cancelled()) co_return ToolResult::failure("CANCELLED", "task_output: cancelled");
    }
    std::optional<TaskInfo> found = context.tasks.info(id);
    const TaskInfo info = *found;
    const std::filesystem::path file = info.output;
    std::function<ToolResult()> read_tail = [file] {
      ToolResult tail;
      std::ifstream in(file, std::ios::binary | std::ios::ate);
      if (!in) return tail;
      const std::streamoff size = in.tellg();
      const std::streamoff from = size > static_cast<std::streamoff>(task_output_shown)
                                      ? size - static_cast<std::streamoff>(task_output_shown)
                                      : 0;
      in.seekg(from);
      tail.text.resize(static_cast<std::size_t>(size - from));
      in.read(tail.text.data(), static_cast<std::streamsize>(tail.text.size()));
      tail.text.resize(static_cast<std::size_t>(in.gcount()));
      tail.meta["size"] = static_cast<std::int64_t>(size);
      return tail;
    };
    ToolResult tail = co_await context.pool.run(std::move(read_tail));
    const std::int64_t size = tail.meta.contains("size") ? tail.meta.at("size").as_int64() : 0;
    std::string text;
    const std::string shown_file = context.workspace.display(info.output);
    if (size > static_cast<std::int64_t>(tail.text.size())) {
      // Start at a line.
      if (const auto nl = tail.text.find('\n'); nl != std::string::npos && nl + 1 < tail.text.size()) {
        tail.text.erase(0, nl + 1);
      }
      text += "[the first " + std::to_string(size - static_cast<std::int64_t>(tail.text.size())) + " of " +
              std::to_string(size) + " bytes are not shown; the whole output is in " + shown_file + "]\n";
    }
    util::make_valid_utf8(tail.text);
    text += tail.text;
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += task_state_line(info);
    ToolResult result;
    result.text = std::move(text);
    result.meta = task_meta(info);
    result.meta["outputBytes"] = size;
    result.meta["output"] = shown_file;
    co_return result;
  }
};

class TaskListTool final : public Tool {
 public:
  std::string_view name() const override { return "task_list"; }
  std::string_view description() const override {
    return "Lists this session's background tasks (started with bash run_in_background): id, state "
           "(running, exited, killed), start time, description and command.";
  }
  const json::object& input_schema() const override {
    static const json::object schema{{"type", "object"}, {"properties", json::object{}}};
    return schema;
  }
  bool read_only() const override { return true; }

  asio::awaitable<ToolResult> run(const json::object&, ToolContext& context) override {
    const std::vector<TaskInfo> tasks = context.tasks.list();
    ToolResult result;
    json::array list;
    for (const TaskInfo& info : tasks) {
      result.text += info.id + "\t" + std::string(to_string(info.state));
      if (info.exit_code) result.text += " (exit code " + std::to_string(*info.exit_code) + ")";
      result.text += "\tstarted " + task_iso_time(info.started) + "\t" + info.description + "\t$ " + info.command + "\n";
      list.push_back(task_meta(info));
    }
    if (tasks.empty()) result.text = "No background tasks in this session.";
    result.meta["tasks"] = std::move(list);
    co_return result;
  }
};

class TaskKillTool final : public Tool {
 public:
  std::string_view name() const override { return "task_kill"; }
  std::string_view description() const override {
    return "Stops a background task: SIGTERM to its whole process group, SIGKILL half a second later. Give a "
           "short reason. Its output stays readable with task_output.";
  }
  const json::object& input_schema() const override {
    static const json::object schema{
        {"type", "object"},
        {"properties",
         json::object{{"task_id", json::object{{"type", "string"}, {"description", "The id bash returned"}}},
                      {"reason", json::object{{"type", "string"}, {"description", "Why it is stopped"}}}}},
        {"required", json::array{"task_id"}}};
    return schema;
  }
  bool read_only() const override { return false; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    std::string error;
    const std::string id = task_id_arg(args, "task_kill", error);
    if (!error.empty()) co_return ToolResult::failure("INVALID_ARGUMENTS", error);
    std::string reason = "killed by task_kill";
    if (const json::value* r = args.if_contains("reason"); r != nullptr && r->is_string() && !r->get_string().empty()) {
      reason = std::string(r->get_string());
    }
    std::optional<TaskInfo> before = context.tasks.info(id);
    if (!before) co_return task_not_found("task_kill", id);
    if (before->state != TaskState::running) {
      ToolResult result;
      result.text = id + " had already ended " + task_state_line(*before);
      result.meta = task_meta(*before);
      co_return result;
    }
    context.tasks.kill(id, reason);
    // SIGKILL follows after 500 ms: the end is normally seen well within 2 s.
    co_await context.tasks.wait(id, std::chrono::milliseconds(2000), context.cancel);
    std::optional<TaskInfo> after = context.tasks.info(id);
    const TaskInfo info = *after;
    ToolResult result;
    result.text = info.state == TaskState::running ? "Sent SIGTERM and SIGKILL to " + id + "; it has not ended yet " +
                                                         task_state_line(info)
                                                   : "Killed " + id + " " + task_state_line(info);
    result.meta = task_meta(info);
    co_return result;
  }
};

}  // namespace

std::unique_ptr<Tool> make_task_output_tool() { return std::make_unique<TaskOutputTool>(); }
std::unique_ptr<Tool> make_task_list_tool() { return std::make_unique<TaskListTool>(); }
std::unique_ptr<Tool> make_task_kill_tool() { return std::make_unique<TaskKillTool>(); }

}  // namespace harnessd::tools
