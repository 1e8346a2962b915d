// Factories of the built-in tools, one per tool file; registry.cpp's
// add_builtin_tools() lists them.
#pragma once

#include "tools/tool.hpp"

#include <memory>

namespace harnessd::tools {

std::unique_ptr<Tool> make_todo_write_tool();
std::unique_ptr<Tool> make_ask_user_question_tool();
std::unique_ptr<Tool> make_web_fetch_tool();
std::unique_ptr<Tool> make_bash_tool();
std::unique_ptr<Tool> make_task_output_tool();
std::unique_ptr<Tool> make_task_list_tool();
std::unique_ptr<Tool> make_task_kill_tool();
std::unique_ptr<Tool> make_read_tool();
std::unique_ptr<Tool> make_write_tool();
std::unique_ptr<Tool> make_edit_tool();
std::unique_ptr<Tool> make_glob_tool();
std::unique_ptr<Tool> make_grep_tool();

}  // namespace harnessd::tools
