// `todo_write`: the model keeps its plan as a checklist. The whole list is
// replaced on each call and logged as a `todo/write` event, so clients show
// it and a reloaded session still has it.
#include "tools/builtin.hpp"

#include "harnessd/protocol/events.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value_from.hpp>

#include <optional>

namespace harnessd::tools {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

class TodoWriteTool final : public Tool {
 public:
  std::string_view name() const override { return "todo_write"; }
  std::string_view description() const override {
    return "Replace your task list for this session with `todos` (each: content, status pending | "
           "in_progress | completed). Use it for work of three or more steps: write the plan first, keep "
           "exactly one item in_progress, mark items completed as soon as they are done, and send the "
           "whole list every time. The user sees it as a checklist.";
  }
  const json::object& input_schema() const override {
    static const json::object schema{
        {"type", "object"},
        {"properties",
         json::object{
             {"todos",
              json::object{
                  {"type", "array"},
                  {"items",
                   json::object{{"type", "object"},
                                {"properties",
                                 json::object{{"content", json::object{{"type", "string"}}},
                                              {"status", json::object{{"type", "string"},
                                                                      {"enum", json::array{"pending", "in_progress",
                                                                                           "completed"}}}}}},
                                {"required", json::array{"content", "status"}}}}}}}},
        {"required", json::array{"todos"}}};
    return schema;
  }
  std::string_view guidance() const override {
    return "For work of three steps or more, keep a todo list with todo_write: one item in_progress at a time, marked "
           "completed as soon as it is done.";
  }
  bool read_only() const override { return false; }
  bool asks_approval() const override { return false; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    const json::value& todos = args.at("todos");
    if (!todos.is_array()) co_return ToolResult::failure("INVALID_ARGUMENTS", "todo_write: \"todos\" must be an array");
    protocol::TodoWrite event;
    std::size_t done = 0;
    std::size_t index = 0;
    for (const json::value& item : todos.get_array()) {
      const std::string where = "todo_write: todos[" + std::to_string(index++) + "]";
      const json::object* todo = item.if_object();
      const json::value* content = todo != nullptr ? todo->if_contains("content") : nullptr;
      const json::value* status = todo != nullptr ? todo->if_contains("status") : nullptr;
      if (content == nullptr || !content->is_string() || content->get_string().empty()) {
        co_return ToolResult::failure("INVALID_ARGUMENTS", where + ".content must be a non-empty string");
      }
      const std::optional<protocol::TodoStatus> parsed =
          status != nullptr && status->is_string() ? protocol::parse_todo_status(status->get_string()) : std::nullopt;
      if (!parsed) {
        co_return ToolResult::failure("INVALID_ARGUMENTS",
                                      where + ".status must be \"pending\", \"in_progress\" or \"completed\"");
      }
      if (*parsed == protocol::TodoStatus::completed) ++done;
      event.todos.push_back(protocol::TodoItem{.content = std::string(content->get_string()), .status = *parsed});
    }
    const std::size_t total = event.todos.size();
    json::object data = json::value_from(event).get_object();
    ToolResult result;
    result.text = "todo list updated: " + std::to_string(done) + " of " + std::to_string(total) + " completed";
    result.meta = json::object{{"todos", data.at("todos")}};
    context.emit(protocol::TodoWrite::type, std::move(data));
    co_return result;
  }
};

}  // namespace

std::unique_ptr<Tool> make_todo_write_tool() { return std::make_unique<TodoWriteTool>(); }

}  // namespace harnessd::tools
