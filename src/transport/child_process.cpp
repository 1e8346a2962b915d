#include "transport/child_process.hpp"

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <stdexcept>
#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace harnessd::transport {

namespace {

/// Closes the descriptors it holds unless released.
struct FdPair {
  int fd[2] = {-1, -1};
  ~FdPair() {
    for (int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
};

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

}  // namespace

Child spawn_child(const ChildSpec& spec) {
  if (spec.argv.empty()) throw std::invalid_argument("spawn_child: no program");
  // in: parent writes -> child stdin; out: child stdout -> parent reads.
  // stdin is a socket, not a pipe: the parent sends with MSG_NOSIGNAL, so a
  // child that closed its stdin costs the parent an EPIPE, never a SIGPIPE
  // (a library must not assume its host ignores SIGPIPE). Our end only
  // sends: the child cannot write back through its stdin.
  FdPair in, out;
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in.fd) != 0) throw_errno(errno, "socketpair");
  ::shutdown(in.fd[1], SHUT_RD);
  if (::pipe2(out.fd, O_CLOEXEC) != 0) throw_errno(errno, "pipe");

  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], STDOUT_FILENO);
  if (spec.quiet) posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (spec.own_process_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  sigset_t no_signals, defaults;
  sigemptyset(&no_signals);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &no_signals);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, flags);

  pid_t pid = -1;
  const std::string& program = spec.argv.front();
  const bool search_path = program.find('/') == std::string::npos;
  const int err = search_path ? ::posix_spawnp(&pid, program.c_str(), &actions, &attr, argv.data(), environ)
                              : ::posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) throw_errno(err, "cannot start " + program);

  // The child's ends close here; ours go to the caller.
  Child child{pid, in.fd[1], out.fd[0]};
  in.fd[1] = -1;
  out.fd[0] = -1;
  return child;
}

std::optional<int> try_reap(pid_t pid) {
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) return status;
  if (r < 0 && errno == ECHILD) return 0;
  return std::nullopt;
}

int open_pidfd(pid_t pid) noexcept {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

std::optional<int> wait_child(pid_t pid, std::chrono::milliseconds timeout) {
  if (std::optional<int> status = try_reap(pid)) return status;
  const int pidfd = open_pidfd(pid);
  if (pidfd < 0) return try_reap(pid);  // reaped meanwhile (ESRCH), or no pidfd: say how it stands now
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<int> status;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd readable{.fd = pidfd, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&readable, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (ready < 0 && errno == EINTR) continue;
    status = try_reap(pid);
    break;
  }
  ::close(pidfd);
  return status;
}

std::string describe_exit(pid_t pid, int status) {
  const std::string who = "harnessd (pid " + std::to_string(pid) + ")";
  if (WIFEXITED(status)) return who + " exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return who + " was killed by signal " + std::to_string(WTERMSIG(status));
  return who + " stopped";
}

}  // namespace harnessd::transport
