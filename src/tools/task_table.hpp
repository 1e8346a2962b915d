// A session's background processes (bash with run_in_background): started
// by one turn, read and killed by later ones through task_output,
// task_list and task_kill. Strand-only, like the session that owns it.
#pragma once

#include "tools/sandbox.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::llm {
class CancelScope;
}

namespace harnessd::tools {

enum class TaskState { running, exited, killed };
std::string_view to_string(TaskState state);

/// One task as task_output and task_list report it.
struct TaskInfo {
  std::string id;
  std::string command;
  std::string description;
  TaskState state = TaskState::running;
  std::optional<int> exit_code;  ///< once it ended: its status, 128+N for signal N
  std::string kill_reason;       ///< task_kill's reason, or why the table killed it
  std::chrono::system_clock::time_point started;
  std::filesystem::path output;  ///< the file its stdout and stderr go to
};

class TaskTable {
 public:
  TaskTable();
  TaskTable(const TaskTable&) = delete;
  TaskTable& operator=(const TaskTable&) = delete;
  /// Kills every task's process group (the session ends, the daemon stops).
  ~TaskTable();

  /// The id the next add() will use ("task-1", ...), so that its output
  /// file can be named before it starts.
  std::string next_id() const;

  /// Takes over a started process; its exit is watched on `executor` (the
  /// session's strand). Returns its id.
  std::string add(boost::asio::any_io_executor executor, SpawnedProcess process, std::string command,
                  std::string description, std::filesystem::path output);

  std::optional<TaskInfo> info(std::string_view id) const;
  /// Every task, oldest first.
  std::vector<TaskInfo> list() const;

  /// SIGTERM to the task's process tree, SIGKILL 500 ms later. False for an
  /// unknown id; true (and nothing done) when it already ended.
  bool kill(std::string_view id, std::string reason);
  /// SIGKILL to every running task, reaped before this returns.
  void kill_all(std::string reason = "killed with its session");

  /// Returns when the task is no longer running, after `timeout`, or when
  /// `cancel` is cancelled, whichever comes first.
  boost::asio::awaitable<void> wait(std::string id, std::chrono::milliseconds timeout, llm::CancelScope& cancel);

 private:
  struct Task;
  std::shared_ptr<Task> find(std::string_view id) const;

  std::vector<std::shared_ptr<Task>> tasks_;
  std::uint64_t next_ = 1;
};

}  // namespace harnessd::tools
