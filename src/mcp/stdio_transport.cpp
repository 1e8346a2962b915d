#include "mcp/stdio_transport.hpp"

#include "transport/child_process.hpp"
#include "transport/line_framer.hpp"
#include "util/utf8.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include <csignal>
#include <deque>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace harnessd::mcp {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

/// A pipe whose ends close unless handed on.
struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
  int take(int end) {
    const int f = fd[end];
    fd[end] = -1;
    return f;
  }
};

struct Spawned {
  pid_t pid = -1;
  int pidfd = -1;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
};

/// The daemon's environment with the server's variables added or replaced.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    if (extra.find(std::string(name)) == extra.end()) env.emplace_back(text);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

/// Throws std::system_error ("cannot start PROGRAM: ...").
Spawned spawn(const ServerConfig& config) {
  Pipe in, out, err;
  if (::pipe2(in.fd, O_CLOEXEC) != 0 || ::pipe2(out.fd, O_CLOEXEC) != 0 || ::pipe2(err.fd, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe");
  }
  std::vector<std::string> args{config.command};
  args.insert(args.end(), config.args.begin(), config.args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = child_environment(config.env);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t no_signals, defaults;
  sigemptyset(&no_signals);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGHUP);
  posix_spawnattr_setsigmask(&attr, &no_signals);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const bool search_path = config.command.find('/') == std::string::npos;
  const int error = search_path
                        ? ::posix_spawnp(&pid, config.command.c_str(), &actions, &attr, argv.data(), envp.data())
                        : ::posix_spawn(&pid, config.command.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (error != 0) throw std::system_error(error, std::generic_category(), "cannot start " + config.command);

  Spawned spawned;
  spawned.pid = pid;
  // Exit is awaited on a pidfd (no SIGCHLD handler, no polling).
  spawned.pidfd = transport::open_pidfd(pid);
  if (spawned.pidfd < 0) {
    const int e = errno;
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    throw std::system_error(e, std::generic_category(), "pidfd_open");
  }
  spawned.stdin_fd = in.take(1);
  spawned.stdout_fd = out.take(0);
  spawned.stderr_fd = err.take(0);
  return spawned;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

class StdioTransport final : public Transport, public std::enable_shared_from_this<StdioTransport> {
 public:
  StdioTransport(Strand strand, const ServerConfig& config, const Options& options)
      : strand_(std::move(strand)), config_(config), options_(options), stdin_(strand_), stdout_(strand_),
        stderr_(strand_), pidfd_(strand_) {}

  ~StdioTransport() override { kill_group(); }

  void start(Handlers handlers) override {
    handlers_ = std::move(handlers);
    Spawned spawned;
    try {
      spawned = spawn(config_);
    } catch (const std::exception& e) {
      // Reported after start() returns, like every other end.
      asio::post(strand_, [self = shared_from_this(), what = std::string(e.what())] { self->closed(what); });
      return;
    }
    pid_ = spawned.pid;
    stdin_.assign(spawned.stdin_fd);
    stdout_.assign(spawned.stdout_fd);
    stderr_.assign(spawned.stderr_fd);
    pidfd_.assign(spawned.pidfd);
    spdlog::info("mcp {}: started {} (pid {})", config_.name, config_.command, pid_);
    asio::co_spawn(strand_, read_stdout(shared_from_this()), asio::detached);
    asio::co_spawn(strand_, read_stderr(shared_from_this()), asio::detached);
    asio::co_spawn(strand_, watch_exit(shared_from_this()), asio::detached);
  }

  void send(std::string message, std::optional<std::int64_t>) override {
    if (done_ || pid_ < 0) return;
    message.push_back('\n');
    queued_bytes_ += message.size();
    queue_.push_back(std::move(message));
    if (queued_bytes_ > options_.max_queued_bytes) {
      closed("it does not read its stdin (" + std::to_string(queued_bytes_) + " bytes queued)");
      return;
    }
    if (!writing_) {
      writing_ = true;
      asio::co_spawn(strand_, write_queue(shared_from_this()), asio::detached);
    }
  }

  void stop() override {
    done_ = true;
    handlers_ = {};
    shut();
  }

 private:
  static asio::awaitable<void> read_stdout(std::shared_ptr<StdioTransport> self) {
    transport::LineFramer framer(self->options_.max_message_bytes);
    error_code ec;
    for (;;) {
      const std::span<char> space = framer.prepare(64 * 1024);
      const std::size_t n = co_await self->stdout_.async_read_some(asio::buffer(space.data(), space.size()),
                                                                   asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      framer.commit(n);
      for (;;) {
        const transport::LineFramer::Next next = framer.next();
        if (next.kind == transport::LineFramer::Kind::need_more) break;
        if (next.kind == transport::LineFramer::Kind::oversized) {
          spdlog::warn("mcp {}: dropped a message over {} bytes", self->config_.name,
                       self->options_.max_message_bytes);
          continue;
        }
        if (self->done_) co_return;
        if (self->handlers_.on_message) self->handlers_.on_message(std::string(next.frame));
      }
    }
    self->closed("closed its stdout");
  }

  static asio::awaitable<void> read_stderr(std::shared_ptr<StdioTransport> self) {
    // Lines of a log, not protocol: a long one is dropped, not kept whole.
    transport::LineFramer framer(16 * 1024);
    error_code ec;
    int lines = 0;
    for (;;) {
      const std::span<char> space = framer.prepare(16 * 1024);
      const std::size_t n = co_await self->stderr_.async_read_some(asio::buffer(space.data(), space.size()),
                                                                   asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      framer.commit(n);
      for (;;) {
        const transport::LineFramer::Next next = framer.next();
        if (next.kind == transport::LineFramer::Kind::need_more) break;
        if (next.kind == transport::LineFramer::Kind::oversized) continue;
        // A chatty server must not flood the log at info.
        const auto level = ++lines <= self->options_.stderr_info_lines ? spdlog::level::info : spdlog::level::debug;
        spdlog::log(level, "mcp {} stderr: {}", self->config_.name, util::valid_utf8(next.frame));
      }
    }
  }

  static asio::awaitable<void> write_queue(std::shared_ptr<StdioTransport> self) {
    error_code ec;
    while (!self->queue_.empty() && !self->done_) {
      const std::string message = std::move(self->queue_.front());
      self->queue_.pop_front();
      self->queued_bytes_ -= message.size();
      co_await asio::async_write(self->stdin_, asio::buffer(message), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        self->writing_ = false;
        self->closed("closed its stdin");
        co_return;
      }
    }
    self->writing_ = false;
  }

  static asio::awaitable<void> watch_exit(std::shared_ptr<StdioTransport> self) {
    error_code ec;
    co_await self->pidfd_.async_wait(asio::posix::stream_descriptor::wait_read,
                                     asio::redirect_error(asio::use_awaitable, ec));
    int status = 0;
    // Readable means exited; without that (an error) the child is killed first.
    if (ec) ::kill(-self->pid_, SIGKILL);
    const pid_t reaped = ::waitpid(self->pid_, &status, ec ? 0 : WNOHANG);
    // Whatever the server left running in its group goes with it.
    ::kill(-self->pid_, SIGKILL);
    self->reaped_ = true;
    self->pidfd_.close(ec);
    if (reaped == self->pid_) {
      spdlog::log(self->done_ ? spdlog::level::debug : spdlog::level::warn, "mcp {}: pid {} {}", self->config_.name,
                  self->pid_, describe_status(status));
      self->closed(describe_status(status));
    } else {
      self->closed("ended");
    }
  }

  void closed(const std::string& reason) {
    if (done_) return;
    done_ = true;
    auto on_closed = std::move(handlers_.on_closed);
    handlers_ = {};
    shut();
    if (on_closed) on_closed(reason);
  }

  /// Kills the group and closes our pipe ends; the exit watcher reaps.
  void shut() {
    kill_group();
    error_code ignored;
    stdin_.close(ignored);
    stdout_.close(ignored);
    stderr_.close(ignored);
    queue_.clear();
    queued_bytes_ = 0;
  }

  void kill_group() {
    if (pid_ > 0 && !reaped_) ::kill(-pid_, SIGKILL);
  }

  Strand strand_;
  const ServerConfig config_;
  const Options options_;
  Handlers handlers_;
  asio::posix::stream_descriptor stdin_;
  asio::posix::stream_descriptor stdout_;
  asio::posix::stream_descriptor stderr_;
  asio::posix::stream_descriptor pidfd_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  bool done_ = false;
  bool writing_ = false;
  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;
};

}  // namespace

std::shared_ptr<Transport> make_stdio_transport(Strand strand, const ServerConfig& config, const Options& options) {
  return std::make_shared<StdioTransport>(std::move(strand), config, options);
}

}  // namespace harnessd::mcp
