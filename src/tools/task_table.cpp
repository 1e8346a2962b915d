// The session's background processes: each task's exit is watched through
// its pidfd on the session's strand (no polling, no SIGCHLD), reaped there,
// and whatever it left in its process group or cgroup is killed with it.
#include "tools/task_table.hpp"

#include "llm/cancel_scope.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <csignal>

#include <sys/wait.h>

namespace harnessd::tools {
namespace asio = boost::asio;

std::string_view to_string(TaskState state) {
  switch (state) {
    case TaskState::running: return "running";
    case TaskState::exited: return "exited";
    case TaskState::killed: return "killed";
  }
  return "running";
}

struct TaskTable::Task : std::enable_shared_from_this<Task> {
  Task(asio::any_io_executor executor, SpawnedProcess spawned)
      : process(spawned), pidfd(executor, spawned.pidfd), grace(executor) {
    process.pidfd = -1;  // owned by the descriptor
  }

  TaskInfo info;
  SpawnedProcess process;
  asio::posix::stream_descriptor pidfd;
  asio::steady_timer grace;  ///< SIGKILL after a SIGTERM that was not enough
  bool kill_requested = false;
  std::vector<asio::steady_timer*> waiters;  ///< task_output calls waiting for the end

  void watch() {
    pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                     [self = shared_from_this()](boost::system::error_code ec) {
                       if (!ec) self->on_exit();
                     });
  }

  void on_exit() {
    if (process.pid <= 0) return;
    // Leftovers first, while the leader's pid still names our group.
    signal_process_tree(process, SIGKILL);
    finish(reap_process(process));
  }

  void finish(int status) {
    info.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    info.state = kill_requested || WIFSIGNALED(status) ? TaskState::killed : TaskState::exited;
    grace.cancel();
    boost::system::error_code ignored;
    pidfd.close(ignored);
    for (asio::steady_timer* waiter : waiters) waiter->cancel();
  }

  void terminate(std::string reason) {
    if (info.state != TaskState::running || kill_requested) return;
    kill_requested = true;
    info.kill_reason = std::move(reason);
    signal_process_tree(process, SIGTERM, process.sandboxed);
    escalate(1);
  }

  /// Stage 1: SIGKILL (a bwrap leader spared, to reap its sandbox and exit);
  /// stage 2: SIGKILL to all.
  void escalate(int stage) {
    grace.expires_after(std::chrono::milliseconds(stage == 1 ? 500 : 300));
    grace.async_wait([self = shared_from_this(), stage](boost::system::error_code ec) {
      if (ec || self->info.state != TaskState::running || self->process.pid <= 0) return;
      const bool spare = stage == 1 && self->process.sandboxed;
      signal_process_tree(self->process, SIGKILL, spare);
      if (spare) self->escalate(2);
    });
  }

  void kill_now(std::string reason) {
    if (info.state != TaskState::running || process.pid <= 0) return;
    kill_requested = true;
    if (info.kill_reason.empty()) info.kill_reason = std::move(reason);
    finish(kill_and_reap(process));
  }
};

TaskTable::TaskTable() = default;

TaskTable::~TaskTable() { kill_all(); }

std::string TaskTable::next_id() const { return "task-" + std::to_string(next_); }

std::string TaskTable::add(asio::any_io_executor executor, SpawnedProcess process, std::string command,
                           std::string description, std::filesystem::path output) {
  auto task = std::make_shared<Task>(std::move(executor), process);
  task->info.id = next_id();
  ++next_;
  task->info.command = std::move(command);
  task->info.description = std::move(description);
  task->info.started = std::chrono::system_clock::now();
  task->info.output = std::move(output);
  tasks_.push_back(task);
  task->watch();
  return task->info.id;
}

std::shared_ptr<TaskTable::Task> TaskTable::find(std::string_view id) const {
  for (const auto& task : tasks_) {
    if (task->info.id == id) return task;
  }
  return nullptr;
}

std::optional<TaskInfo> TaskTable::info(std::string_view id) const {
  auto task = find(id);
  if (!task) return std::nullopt;
  return task->info;
}

std::vector<TaskInfo> TaskTable::list() const {
  std::vector<TaskInfo> result;
  result.reserve(tasks_.size());
  for (const auto& task : tasks_) result.push_back(task->info);
  return result;
}

bool TaskTable::kill(std::string_view id, std::string reason) {
  auto task = find(id);
  if (!task) return false;
  task->terminate(std::move(reason));
  return true;
}

void TaskTable::kill_all(std::string reason) {
  for (const auto& task : tasks_) task->kill_now(reason);
}

asio::awaitable<void> TaskTable::wait(std::string id, std::chrono::milliseconds timeout, llm::CancelScope& cancel) {
  std::shared_ptr<Task> task = find(id);
  if (!task || task->info.state != TaskState::running || cancel.cancelled()) co_return;
  asio::any_io_executor executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor, timeout);
  task->waiters.push_back(&timer);
  {
    llm::CancelScope::Hook hook(cancel, [&timer] { timer.cancel(); });
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  std::erase(task->waiters, &timer);
}

}  // namespace harnessd::tools
