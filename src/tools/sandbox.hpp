// How bash's commands are confined (AGENT.md §3): the bubblewrap command
// line for a sandbox mode, the scrubbed environment, the resource limits,
// and the one place a confined process is started, signalled and reaped.
#pragma once

#include "tools/workspace.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace harnessd::tools {

/// What to exec for one command: argv (bwrap ... /bin/bash -c CMD, or
/// /bin/bash -c CMD for danger-full-access), its environment, the directory
/// to start in and the limits set in the child before exec.
struct SandboxCommand {
  std::vector<std::string> argv;
  std::vector<std::string> env;  ///< NAME=VALUE
  std::string cwd;
  std::uint64_t cpu_seconds = 0;  ///< RLIMIT_CPU; 0: none
  std::uint64_t max_file_bytes = 0;
  std::uint64_t max_processes = 0;
  std::uint64_t max_memory_bytes = 0;
  bool sandboxed = false;  ///< argv[0] is bwrap
};

/// Whether an environment variable name must not reach a sandboxed command
/// (its name contains KEY, SECRET, TOKEN or PASSWORD, any case).
bool is_secret_env_name(std::string_view name);

/// The daemon's environment minus secret names, with HOME, TMPDIR, PWD,
/// PATH and LANG set for the sandbox.
std::vector<std::string> scrubbed_environment(const std::filesystem::path& home, const std::filesystem::path& workdir,
                                              const std::string& tmpdir);

/// The command line that runs `command` under `mode`. `workspace` and
/// `workdir` are canonical; `workdir` is the workspace or inside it.
SandboxCommand build_sandbox_command(SandboxMode mode, const SandboxOptions& options,
                                     const std::filesystem::path& workspace, const std::filesystem::path& workdir,
                                     const std::string& command, std::chrono::milliseconds timeout);

/// Whether bubblewrap can confine a command on this host; probed once per
/// bwrap binary and network setting (a real `bwrap ... true`), then cached.
/// Blocks on the first call: call it from a pool thread.
bool sandbox_available(const SandboxOptions& options, std::string* why);

/// What works here, one fact a line, for `harnessd --check-sandbox`. Blocks.
std::string sandbox_report(const SandboxOptions& options);

/// A started process: its own process group (pgid == pid), a pidfd that
/// becomes readable when it exits, and the pids cgroup that holds it and
/// its descendants (empty when the host has none we may use).
struct SpawnedProcess {
  pid_t pid = -1;
  int pidfd = -1;
  std::string cgroup;
  bool sandboxed = false;  ///< the leader is bwrap
};

/// Starts `command` with stdin from /dev/null and stdout/stderr on the given
/// descriptors (the caller closes its copies). Throws std::system_error
/// when the process cannot be started (fork, exec or pidfd failed).
SpawnedProcess spawn_sandboxed(const SandboxCommand& command, int stdout_fd, int stderr_fd);

/// Sends `signal` to the process group and to every process of the cgroup.
/// Call it before reaping the leader, so that its id is still ours.
/// `spare_leader` (with a cgroup): all but the leader, a bwrap that ends
/// when its sandbox does and reaps it; killing bwrap first would leave the
/// sandbox's init a zombie for whatever reaps orphans.
void signal_process_tree(const SpawnedProcess& process, int signal, bool spare_leader = false);

/// Reaps an exited process (it must have exited: its pidfd is readable) and
/// removes its cgroup once empty. Returns the waitpid status.
int reap_process(SpawnedProcess& process);

/// Kills the tree and reaps the leader, blocking until it is gone (a
/// destructor's last resort; SIGKILL makes this quick). Returns the status.
int kill_and_reap(SpawnedProcess& process);

}  // namespace harnessd::tools
