// The bash tool: one shell command in the session's sandbox, its output read
// through non-blocking pipes on the session's strand and its exit seen
// through a pidfd; a timeout or a cancelled turn kills its whole tree.
#include "tools/builtin.hpp"
#include "tools/sandbox.hpp"
#include "tools/task_table.hpp"
#include "tools/tool_pool.hpp"

#include "llm/cancel_scope.hpp"
#include "util/utf8.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <memory>
#include <system_error>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace harnessd::tools {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr std::size_t bash_stream_kept = 64 * 1024;         // per stream, in the result
constexpr std::size_t bash_stream_spill_cap = 64 << 20;      // per stream, kept for the spill file
constexpr std::int64_t bash_default_timeout_ms = 120000;
constexpr std::int64_t bash_max_timeout_ms = 600000;
constexpr auto bash_kill_grace = std::chrono::milliseconds(500);
constexpr auto bash_drain_grace = std::chrono::milliseconds(500);

/// One output pipe: the first 64 KiB for the result, the rest for the spill.
struct BashStream {
  BashStream(const asio::any_io_executor& executor, int fd) : pipe(executor, fd) {}
  asio::posix::stream_descriptor pipe;
  std::array<char, 16384> buffer{};
  std::string kept;
  std::string rest;
  std::uint64_t total = 0;
  std::uint64_t dropped = 0;  ///< past the spill cap

  void take(const char* data, std::size_t n) {
    total += n;
    const std::size_t to_kept = std::min(n, bash_stream_kept - std::min(kept.size(), bash_stream_kept));
    kept.append(data, to_kept);
    data += to_kept;
    n -= to_kept;
    const std::size_t to_rest = std::min(n, bash_stream_spill_cap - std::min(rest.size(), bash_stream_spill_cap));
    rest.append(data, to_rest);
    dropped += n - to_rest;
  }
};

/// One foreground command: three waits (two pipes, the pidfd) and a timer
/// for the timeout, the SIGKILL after SIGTERM, and the drain after exit.
/// Every handler runs on the caller's executor (its strand).
class BashRun : public std::enable_shared_from_this<BashRun> {
 public:
  BashRun(const asio::any_io_executor& executor, SpawnedProcess spawned, int out_fd, int err_fd)
      : out(executor, out_fd), err(executor, err_fd), pidfd(executor, spawned.pidfd), timer(executor),
        finished(executor, asio::steady_timer::time_point::max()), process(spawned) {
    process.pidfd = -1;
  }

  BashStream out;
  BashStream err;
  asio::posix::stream_descriptor pidfd;
  asio::steady_timer timer;
  asio::steady_timer finished;  ///< cancelled when all three waits are over
  SpawnedProcess process;
  int status = 0;
  bool exited = false;
  bool timed_out = false;
  bool cancelled = false;
  int kill_stage = 0;  ///< 1: SIGTERM sent, 2: SIGKILL (to the sandbox), 3: SIGKILL to all
  bool done = false;
  int pending = 3;

  void start(std::chrono::milliseconds timeout) {
    read(out);
    read(err);
    pidfd.async_wait(asio::posix::stream_descriptor::wait_read,
                     [self = shared_from_this()](boost::system::error_code ec) {
                       if (!ec) self->on_exit();
                       else self->one_done();
                     });
    arm(timeout);
  }

  void cancel() {
    cancelled = true;
    terminate();
  }

  /// Last resort (the coroutine is gone while the process runs).
  void abandon() {
    if (process.pid > 0) kill_and_reap(process);
  }

 private:
  void read(BashStream& stream) {
    stream.pipe.async_read_some(asio::buffer(stream.buffer),
                                [self = shared_from_this(), &stream](boost::system::error_code ec, std::size_t n) {
                                  if (n > 0) stream.take(stream.buffer.data(), n);
                                  if (ec) {
                                    self->one_done();
                                    return;
                                  }
                                  self->read(stream);
                                });
  }

  void one_done() {
    if (--pending > 0) return;
    done = true;
    timer.cancel();
    finished.cancel();
  }

  void terminate() {
    if (exited || kill_stage > 0) return;
    kill_stage = 1;
    signal_process_tree(process, SIGTERM, process.sandboxed);
    arm(bash_kill_grace);
  }

  void arm(std::chrono::milliseconds after) {
    timer.expires_after(after);
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->on_timer();
    });
  }

  void on_timer() {
    if (exited) {
      // The command is gone but something still holds a pipe open (a
      // process that left our group and cgroup): stop reading.
      boost::system::error_code ignored;
      out.pipe.cancel(ignored);
      err.pipe.cancel(ignored);
      return;
    }
    if (kill_stage == 0) {
      timed_out = true;
      terminate();
    } else if (kill_stage == 1) {
      // SIGKILL; a bwrap leader is spared a little longer, to reap its
      // sandbox and exit by itself.
      kill_stage = 2;
      signal_process_tree(process, SIGKILL, process.sandboxed);
      if (process.sandboxed) arm(std::chrono::milliseconds(300));
    } else {
      kill_stage = 3;
      signal_process_tree(process, SIGKILL);
    }
  }

  void on_exit() {
    // Kill what the command left behind while its pid still names the group.
    signal_process_tree(process, SIGKILL);
    status = reap_process(process);
    exited = true;
    arm(bash_drain_grace);
    one_done();
  }
};

std::atomic<std::uint64_t> bash_spill_counter{0};

std::string bash_unique_name(std::string_view kind) {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  return "bash-" + std::to_string(now) + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(bash_spill_counter.fetch_add(1)) + "-" + std::string(kind);
}

/// Writes `data` to WORKSPACE/.harnessd/spill/NAME; returns the path, or
/// empty with `error` set. Blocking: pool only.
std::filesystem::path bash_write_spill(const std::filesystem::path& root, const std::string& name,
                                       const std::string& data, std::string& error) {
  std::error_code ec;
  const std::filesystem::path dir = root / ".harnessd" / "spill";
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    error = "cannot create " + dir.string() + ": " + ec.message();
    return {};
  }
  const std::filesystem::path path = dir / name;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(data.data(), static_cast<std::streamsize>(data.size()));
  file.close();
  if (!file) {
    error = "cannot write " + path.string();
    return {};
  }
  return path;
}

void bash_append_stream(std::string& text, std::string_view label, const BashStream& stream, const std::string& spill,
                        const std::string& spill_error) {
  std::string kept = stream.kept;
  util::make_valid_utf8(kept);
  text += kept;
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (stream.total <= bash_stream_kept) return;
  text += "[" + std::string(label) + " cut: the first " + std::to_string(stream.kept.size()) + " of " +
          std::to_string(stream.total) + " bytes are above; ";
  if (!spill.empty()) {
    text += "the rest is in " + spill;
    if (stream.dropped > 0) text += " (its last " + std::to_string(stream.dropped) + " bytes were not kept)";
  } else {
    text += "the rest was not kept (" + spill_error + ")";
  }
  text += "]\n";
}

struct BashArgs {
  std::string command;
  std::string description;
  std::int64_t timeout_ms = bash_default_timeout_ms;
  bool timeout_given = false;
  std::string workdir;
  bool background = false;
  std::string error;  ///< INVALID_ARGUMENTS message
};

BashArgs bash_parse(const json::object& args) {
  BashArgs parsed;
  const json::value* command = args.if_contains("command");
  if (command == nullptr || !command->is_string() || command->get_string().empty()) {
    parsed.error = "bash: \"command\" must be a non-empty string";
    return parsed;
  }
  parsed.command = std::string(command->get_string());
  if (const json::value* d = args.if_contains("description"); d != nullptr && d->is_string()) {
    parsed.description = std::string(d->get_string());
  }
  if (const json::value* t = args.if_contains("timeoutMs"); t != nullptr && !t->is_null()) {
    if (t->is_int64()) parsed.timeout_ms = t->get_int64();
    else if (t->is_uint64()) parsed.timeout_ms = static_cast<std::int64_t>(std::min<std::uint64_t>(t->get_uint64(), bash_max_timeout_ms));
    else if (t->is_double()) parsed.timeout_ms = static_cast<std::int64_t>(t->get_double());
    else {
      parsed.error = "bash: \"timeoutMs\" must be a number of milliseconds";
      return parsed;
    }
    parsed.timeout_ms = std::clamp<std::int64_t>(parsed.timeout_ms, 1, bash_max_timeout_ms);
    parsed.timeout_given = true;
  }
  if (const json::value* w = args.if_contains("workdir"); w != nullptr && !w->is_null()) {
    if (!w->is_string()) {
      parsed.error = "bash: \"workdir\" must be a string";
      return parsed;
    }
    parsed.workdir = std::string(w->get_string());
  }
  if (const json::value* b = args.if_contains("run_in_background"); b != nullptr && !b->is_null()) {
    if (!b->is_bool()) {
      parsed.error = "bash: \"run_in_background\" must be a boolean";
      return parsed;
    }
    parsed.background = b->get_bool();
  }
  return parsed;
}

class BashTool final : public Tool {
 public:
  std::string_view name() const override { return "bash"; }
  std::string_view description() const override {
    return "Runs a shell command with /bin/bash -c in the session's workspace and returns its stdout, then its "
           "stderr, then \"[exit code: N]\" (or \"[timed out after MS ms]\").\n"
           "\n"
           "- Use it for builds, tests, git, package scripts and other programs. To look at or change files, "
           "prefer the dedicated tools: read (not cat/head/tail), grep (not grep/rg), glob (not find/ls -R), "
           "edit and write (not sed/awk/echo >).\n"
           "- Quote paths that contain spaces or special characters: cd \"my dir\". Chain dependent steps with "
           "&& and use workdir instead of cd where you can.\n"
           "- timeoutMs defaults to 120000 (2 minutes), at most 600000. On timeout the command and everything "
           "it started is killed.\n"
           "- For servers, watchers and jobs that run longer, set run_in_background: true. It returns a task_id "
           "at once; read the output with task_output (wait: true to block until it ends), list tasks with "
           "task_list and stop one with task_kill. Do not end a command with & to background it.\n"
           "- Each stream shows its first 64 KiB; the rest is saved in a file under .harnessd/spill/ named in "
           "the result: read or grep that file instead of running the command again. Pipe long output through "
           "head, tail or grep.\n"
           "- The command runs in a sandbox: it can write only inside the workspace and its own TMPDIR (emptied "
           "after every command), it has no network access (package installs and downloads fail), and its "
           "processes, file sizes and CPU time are limited. HOME is the workspace; environment variables whose "
           "names contain KEY, SECRET, TOKEN or PASSWORD are removed.\n"
           "- Give a short description (5-10 words) of what the command does.";
  }
  const json::object& input_schema() const override {
    static const json::object schema{
        {"type", "object"},
        {"properties",
         json::object{
             {"command", json::object{{"type", "string"}, {"description", "The command to run with /bin/bash -c"}}},
             {"description",
              json::object{{"type", "string"}, {"description", "What the command does, in 5-10 words"}}},
             {"timeoutMs",
              json::object{{"type", "integer"},
                           {"description", "Timeout in milliseconds (default 120000, at most 600000)"},
                           {"minimum", 1},
                           {"maximum", bash_max_timeout_ms}}},
             {"workdir",
              json::object{{"type", "string"},
                           {"description", "Directory to run in, inside the workspace (default: its root)"}}},
             {"run_in_background",
              json::object{{"type", "boolean"},
                           {"description", "Start the command as a background task and return its task_id at once"}}}}},
        {"required", json::array{"command", "description"}}};
    return schema;
  }
  std::string_view guidance() const override {
    return "Commands run in a sandbox: the workspace is writable, the rest of the file system is not, and the network "
           "is off unless the daemon allows it. Prefer read, grep and glob over cat, grep and find; run long jobs in "
           "the background and poll them with task_output.";
  }
  bool read_only() const override { return false; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    BashArgs parsed = bash_parse(args);
    if (!parsed.error.empty()) co_return ToolResult::failure("INVALID_ARGUMENTS", parsed.error);
    if (context.cancel.cancelled()) co_return ToolResult::failure("CANCELLED", "bash: cancelled before it started");

    if (context.sandbox != SandboxMode::danger_full_access) {
      const SandboxOptions* options = &context.sandbox_options;
      std::function<ToolResult()> probe = [options] {
        ToolResult verdict;
        std::string why;
        if (!sandbox_available(*options, &why)) verdict.error = ToolError{"SANDBOX_UNAVAILABLE", why};
        return verdict;
      };
      ToolResult verdict = co_await context.pool.run(std::move(probe));
      if (verdict.error) {
        co_return ToolResult::failure("SANDBOX_UNAVAILABLE",
                                      "bash: no sandbox on this host (" + verdict.error->message +
                                          "); see harnessd --check-sandbox");
      }
    }

    Workspace::Resolved workdir = context.workspace.resolve(parsed.workdir.empty() ? "." : parsed.workdir);
    if (!workdir.error.empty()) co_return ToolResult::failure("PATH_OUTSIDE_WORKSPACE", "bash: " + workdir.error);
    std::error_code ec;
    if (!std::filesystem::is_directory(workdir.path, ec)) {
      co_return ToolResult::failure("NOT_FOUND", "bash: workdir " + context.workspace.display(workdir.path) +
                                                     " is not a directory");
    }

    // A background task has no wall-clock timeout; its CPU time is bounded
    // by the timeout it was given, or the longest one.
    const std::chrono::milliseconds timeout(parsed.background && !parsed.timeout_given ? bash_max_timeout_ms
                                                                                       : parsed.timeout_ms);
    SandboxCommand command = build_sandbox_command(context.sandbox, context.sandbox_options, context.workspace.root(),
                                                   workdir.path, parsed.command, timeout);
    asio::any_io_executor executor = co_await asio::this_coro::executor;
    if (parsed.background) {
      ToolResult started = start_background(executor, command, parsed, context);
      co_return started;
    }
    ToolResult result = co_await run_foreground(executor, command, parsed, context);
    co_return result;
  }

 private:
  static ToolResult start_background(const asio::any_io_executor& executor, const SandboxCommand& command,
                                     const BashArgs& parsed, ToolContext& context) {
    const std::string id = context.tasks.next_id();
    std::error_code ec;
    const std::filesystem::path dir = context.workspace.root() / ".harnessd" / "tasks";
    std::filesystem::create_directories(dir, ec);
    const std::filesystem::path log = dir / (id + "-" + std::to_string(::getpid()) + ".log");
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      return ToolResult::failure("SPAWN_FAILED", "bash: cannot create " + log.string() + ": " + std::strerror(errno));
    }
    SpawnedProcess process;
    try {
      process = spawn_sandboxed(command, fd, fd);
    } catch (const std::system_error& e) {
      ::close(fd);
      return ToolResult::failure("SPAWN_FAILED", std::string("bash: ") + e.what());
    }
    ::close(fd);
    const std::string added = context.tasks.add(executor, process, parsed.command, parsed.description, log);
    ToolResult result;
    result.text = "Started background task " + added + " (output goes to " + context.workspace.display(log) +
                  "). Read it with task_output {\"task_id\": \"" + added + "\"}; stop it with task_kill.";
    result.meta = json::object{{"taskId", added}, {"output", context.workspace.display(log)}};
    return result;
  }

  static asio::awaitable<ToolResult> run_foreground(asio::any_io_executor executor, const SandboxCommand& command,
                                                    const BashArgs& parsed, ToolContext& context) {
    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      co_return ToolResult::failure("SPAWN_FAILED", std::string("bash: pipe: ") + std::strerror(errno));
    }
    if (::pipe2(err_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      ::close(out_pipe[0]);
      ::close(out_pipe[1]);
      co_return ToolResult::failure("SPAWN_FAILED", std::string("bash: pipe: ") + std::strerror(errno));
    }
    // The child's ends block, as programs expect.
    ::fcntl(out_pipe[1], F_SETFL, 0);
    ::fcntl(err_pipe[1], F_SETFL, 0);
    SpawnedProcess process;
    std::string spawn_error;
    try {
      process = spawn_sandboxed(command, out_pipe[1], err_pipe[1]);
    } catch (const std::system_error& e) {
      spawn_error = e.what();
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    if (!spawn_error.empty()) {
      ::close(out_pipe[0]);
      ::close(err_pipe[0]);
      co_return ToolResult::failure("SPAWN_FAILED", "bash: " + spawn_error);
    }

    auto run = std::make_shared<BashRun>(executor, process, out_pipe[0], err_pipe[0]);
    run->start(std::chrono::milliseconds(parsed.timeout_ms));
    {
      llm::CancelScope::Hook hook(context.cancel, [run] { run->cancel(); });
      if (context.cancel.cancelled()) run->cancel();
      if (!run->done) {
        boost::system::error_code ec;
        co_await run->finished.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
    }
    if (!run->done) run->abandon();  // not reached unless the wait failed oddly

    const std::filesystem::path root = context.workspace.root();
    std::string out_spill, err_spill, spill_error;
    if (!run->out.rest.empty() || !run->err.rest.empty()) {
      std::function<ToolResult()> spill = [run, root] {
        ToolResult written;
        std::string error;
        if (!run->out.rest.empty()) {
          written.meta["stdout"] = bash_write_spill(root, bash_unique_name("stdout.txt"), run->out.rest, error).string();
        }
        if (!run->err.rest.empty()) {
          written.meta["stderr"] = bash_write_spill(root, bash_unique_name("stderr.txt"), run->err.rest, error).string();
        }
        written.text = error;
        return written;
      };
      ToolResult written = co_await context.pool.run(std::move(spill));
      spill_error = written.text;
      if (const json::value* p = written.meta.if_contains("stdout"); p != nullptr && !p->get_string().empty()) {
        out_spill = context.workspace.display(std::string(p->get_string()));
      }
      if (const json::value* p = written.meta.if_contains("stderr"); p != nullptr && !p->get_string().empty()) {
        err_spill = context.workspace.display(std::string(p->get_string()));
      }
    }

    std::string text;
    bash_append_stream(text, "stdout", run->out, out_spill, spill_error);
    bash_append_stream(text, "stderr", run->err, err_spill, spill_error);
    if (text == "\n") text.clear();
    if (text.size() > 1 && text[0] == '\n') text.erase(0, 1);
    const int status = run->status;
    const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
    if (run->timed_out) {
      text += "[timed out after " + std::to_string(parsed.timeout_ms) + " ms]";
    } else {
      text += "[exit code: " + std::to_string(exit_code) + "]";
    }
    json::object meta{{"exitCode", exit_code},
                      {"timedOut", run->timed_out},
                      {"stdoutBytes", run->out.total},
                      {"stderrBytes", run->err.total}};
    if (!out_spill.empty()) meta["stdoutFile"] = out_spill;
    if (!err_spill.empty()) meta["stderrFile"] = err_spill;
    if (run->cancelled && !run->timed_out) {
      ToolResult cancelled = ToolResult::failure("CANCELLED", "bash: cancelled; the command was killed");
      cancelled.text += "\n" + text;
      cancelled.meta = std::move(meta);
      co_return cancelled;
    }
    ToolResult result;
    result.text = std::move(text);
    result.meta = std::move(meta);
    co_return result;
  }
};

}  // namespace

std::unique_ptr<Tool> make_bash_tool() { return std::make_unique<BashTool>(); }

}  // namespace harnessd::tools
