// A child process on a socket (its stdin) and a pipe (its stdout): the far
// end of a stdio transport, as the client and harness-bench start
// `harnessd --stdio`.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace harnessd::transport {

struct ChildSpec {
  /// argv[0] is the program; a name without '/' is looked up in PATH.
  std::vector<std::string> argv;
  /// Its own process group: a Ctrl-C at the terminal reaches the parent only.
  bool own_process_group = false;
  /// stderr to /dev/null instead of the parent's.
  bool quiet = false;
};

/// The child and the parent's ends of its pipes (close-on-exec; the caller
/// owns them).
struct Child {
  pid_t pid = -1;
  int stdin_fd = -1;   ///< write here: the child's stdin (a UNIX stream socket; send, never read)
  int stdout_fd = -1;  ///< read here: the child's stdout
};

/// Starts the child with SIGPIPE, SIGINT and SIGTERM at their defaults and
/// no signal blocked. Throws std::system_error ("cannot start PROGRAM: ...").
Child spawn_child(const ChildSpec& spec);

/// The child's waitpid status once it has exited, without blocking;
/// nullopt while it runs. A child already reaped elsewhere counts as status 0.
std::optional<int> try_reap(pid_t pid);

/// A pidfd of `pid` (close-on-exec; readable once it exits), or -1 with
/// errno set. The caller owns it.
int open_pidfd(pid_t pid) noexcept;

/// Waits up to `timeout` for the child to exit and reaps it, blocking the
/// thread (on its pidfd: no polling); nullopt if it still runs.
std::optional<int> wait_child(pid_t pid, std::chrono::milliseconds timeout);

/// "harnessd (pid 12) exited with status 1", "... was killed by signal 9".
std::string describe_exit(pid_t pid, int status);

}  // namespace harnessd::transport
