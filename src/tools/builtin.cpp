#include "tools/builtin.hpp"
#include "tools/registry.hpp"

namespace harnessd::tools {

void add_builtin_tools(ToolRegistry& registry, const SandboxOptions& options) {
  registry.add(make_todo_write_tool());
  registry.add(make_ask_user_question_tool());
  registry.add(make_bash_tool());
  registry.add(make_task_output_tool());
  registry.add(make_task_list_tool());
  registry.add(make_task_kill_tool());
  registry.add(make_read_tool());
  registry.add(make_write_tool());
  registry.add(make_edit_tool());
  registry.add(make_glob_tool());
  registry.add(make_grep_tool());
  // Offered only when on: a fetch leaves from the daemon's network position.
  if (options.web_fetch) registry.add(make_web_fetch_tool());
}

}  // namespace harnessd::tools
