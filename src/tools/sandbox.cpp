// bubblewrap command lines, the probe that decides whether they work here
// (fail closed when they do not), and fork+exec with limits, own process
// group and a pids cgroup, so a killed command leaves nothing behind.
#include "tools/sandbox.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace harnessd::tools {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void sb_throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

struct SbFd {
  int fd = -1;
  SbFd() = default;
  explicit SbFd(int f) : fd(f) {}
  SbFd(const SbFd&) = delete;
  SbFd& operator=(const SbFd&) = delete;
  ~SbFd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  int release() { return std::exchange(fd, -1); }
};

bool sb_inside(const fs::path& path, const fs::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p) {
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

/// `name` as an absolute path: itself when it has a '/', else from PATH.
std::string sb_find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : std::string();
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream in(dirs);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// --- pids cgroup ------------------------------------------------------------
// RLIMIT_NPROC does not bind uid 0 (the kernel exempts the initial user), and
// a daemon in a container often runs as root: a cgroup v1 pids hierarchy we
// may write gives every command its own pids.max, and a list of every
// process it left, however it detached.

std::mutex sb_cgroup_mutex;
std::vector<std::string> sb_stale_cgroups;  // rmdir failed (still busy); retried later
std::atomic<std::uint64_t> sb_cgroup_counter{0};

std::string sb_pids_cgroup_base() {
  static const std::string base = [] {
    const fs::path mount = "/sys/fs/cgroup/pids";
    if (::access((mount / "cgroup.procs").c_str(), W_OK) != 0) return std::string();
    std::ifstream in("/proc/self/cgroup");
    std::string line, own;
    while (std::getline(in, line)) {
      // "8:pids:/some/path"
      const auto first = line.find(':');
      const auto second = line.find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos) continue;
      std::string controllers = line.substr(first + 1, second - first - 1);
      if (("," + controllers + ",").find(",pids,") != std::string::npos) own = line.substr(second + 1);
    }
    fs::path dir = mount;
    if (!own.empty() && own != "/") dir /= fs::path(own).relative_path();
    dir /= "harnessd-" + std::to_string(::getpid());
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return std::string();
    return dir.string();
  }();
  if (!base.empty()) {
    // At exit: the cgroups of commands killed last (their processes were
    // still dying when reaped), then our own.
    struct Cleanup {
      std::string dir;
      ~Cleanup() {
        for (int attempt = 0; attempt < 100; ++attempt) {
          {
            std::lock_guard lock(sb_cgroup_mutex);
            std::erase_if(sb_stale_cgroups,
                          [](const std::string& d) { return ::rmdir(d.c_str()) == 0 || errno == ENOENT; });
            if (sb_stale_cgroups.empty()) break;
          }
          ::usleep(2000);
        }
        ::rmdir(dir.c_str());
      }
    };
    static Cleanup cleanup{base};
  }
  return base;
}

bool sb_write_file(const std::string& path, const std::string& text) {
  SbFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.fd < 0) return false;
  return ::write(fd.fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

void sb_retry_stale_locked() {
  std::erase_if(sb_stale_cgroups, [](const std::string& dir) { return ::rmdir(dir.c_str()) == 0 || errno == ENOENT; });
}

/// A fresh cgroup for one command with pids.max set; empty when none.
std::string sb_make_cgroup(std::uint64_t max_processes) {
  const std::string base = sb_pids_cgroup_base();
  if (base.empty()) return {};
  {
    std::lock_guard lock(sb_cgroup_mutex);
    sb_retry_stale_locked();
  }
  std::string dir = base + "/run-" + std::to_string(sb_cgroup_counter.fetch_add(1));
  if (::mkdir(dir.c_str(), 0755) != 0) return {};
  if (max_processes > 0 && !sb_write_file(dir + "/pids.max", std::to_string(max_processes))) {
    ::rmdir(dir.c_str());
    return {};
  }
  return dir;
}

void sb_remove_cgroup(const std::string& dir) {
  if (dir.empty()) return;
  if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
  std::lock_guard lock(sb_cgroup_mutex);
  sb_stale_cgroups.push_back(dir);
}

std::vector<pid_t> sb_cgroup_pids(const std::string& dir) {
  std::vector<pid_t> pids;
  std::ifstream in(dir + "/cgroup.procs");
  pid_t pid = 0;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

// --- the probe ----------------------------------------------------------------

struct SbProbe {
  bool ok = false;
  std::string output;  // stdout and stderr
};

/// Runs argv with output on a pipe, for at most 10 s. Blocks.
SbProbe sb_run_probe(const std::vector<std::string>& argv) {
  SbProbe result;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.output = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  SbFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  SandboxCommand command;
  command.argv = argv;
  command.env = scrubbed_environment("/", "/", "/tmp");
  command.cwd = "/";
  SpawnedProcess process;
  try {
    process = spawn_sandboxed(command, write_end.fd, write_end.fd);
  } catch (const std::system_error& e) {
    result.output = e.what();
    return result;
  }
  write_end.reset();
  SbFd pidfd(process.pidfd);
  process.pidfd = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::array<char, 4096> buffer;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{read_end.fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::read(read_end.fd, buffer.data(), buffer.size());
    if (n <= 0) break;
    if (result.output.size() < 4096) result.output.append(buffer.data(), static_cast<std::size_t>(n));
  }
  pollfd p{pidfd.fd, POLLIN, 0};
  if (::poll(&p, 1, 2000) <= 0) {
    kill_and_reap(process);
    result.output += " (timed out)";
    return result;
  }
  const int status = reap_process(process);
  result.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  while (!result.output.empty() && std::isspace(static_cast<unsigned char>(result.output.back()))) result.output.pop_back();
  if (!result.ok && result.output.empty()) {
    result.output = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                        : "exit status " + std::to_string(WEXITSTATUS(status));
  }
  return result;
}

std::vector<std::string> sb_bwrap_base(const std::string& bwrap, bool network) {
  std::vector<std::string> argv = {bwrap, "--die-with-parent", "--new-session", "--unshare-all"};
  if (network) argv.emplace_back("--share-net");
  // Root keeps every capability in the sandbox otherwise, and could unmount
  // the tmpfs that hides the other workspaces.
  for (const char* arg : {"--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"}) {
    argv.emplace_back(arg);
  }
  return argv;
}

}  // namespace

bool is_secret_env_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (std::string_view word : {"KEY", "SECRET", "TOKEN", "PASSWORD"}) {
    if (upper.find(word) != std::string::npos) return true;
  }
  return false;
}

std::vector<std::string> scrubbed_environment(const fs::path& home, const fs::path& workdir, const std::string& tmpdir) {
  std::map<std::string, std::string> vars;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view item(*entry);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string name(item.substr(0, eq));
    if (is_secret_env_name(name)) continue;
    vars[name] = std::string(item.substr(eq + 1));
  }
  vars.erase("OLDPWD");
  vars["HOME"] = home.string();
  vars["TMPDIR"] = tmpdir;
  vars["PWD"] = workdir.string();
  if (vars.find("PATH") == vars.end()) vars["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  if (vars.find("LANG") == vars.end()) vars["LANG"] = "C.UTF-8";
  std::vector<std::string> env;
  env.reserve(vars.size());
  for (auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

SandboxCommand build_sandbox_command(SandboxMode mode, const SandboxOptions& options, const fs::path& workspace,
                                     const fs::path& workdir, const std::string& command,
                                     std::chrono::milliseconds timeout) {
  SandboxCommand result;
  result.cpu_seconds = static_cast<std::uint64_t>((timeout.count() + 999) / 1000);
  result.max_file_bytes = options.max_file_bytes;
  result.max_processes = options.max_processes;
  result.max_memory_bytes = options.max_memory_bytes;
  if (mode == SandboxMode::danger_full_access) {
    result.argv = {"/bin/bash", "-c", command};
    result.env = scrubbed_environment(workspace, workdir, "/tmp");
    result.cwd = workdir.string();
    return result;
  }
  std::string bwrap = sb_find_program(options.bwrap);
  if (bwrap.empty()) bwrap = options.bwrap;
  result.argv = sb_bwrap_base(bwrap, options.network);
  result.sandboxed = true;
  auto add = [&result](std::initializer_list<std::string> args) {
    result.argv.insert(result.argv.end(), args.begin(), args.end());
  };
  // A private, size-bounded /tmp: the command's TMPDIR, gone when it ends.
  add({"--size", std::to_string(options.max_file_bytes), "--tmpfs", "/tmp"});
  // Hidden directories: an empty tmpfs over each. Those that hold the
  // workspace go before it is bound back; those inside it go after.
  std::vector<fs::path> before, after;
  for (const std::string& hidden : options.hidden_paths) {
    std::error_code ec;
    fs::path path = fs::canonical(hidden, ec);
    if (ec || !fs::is_directory(path, ec)) continue;  // nothing there to hide
    // Under /tmp nothing shows but the workspace itself: only what lies
    // inside the workspace needs covering there.
    if (path == workspace || (sb_inside(path, "/tmp") && !sb_inside(path, workspace))) continue;
    (sb_inside(path, workspace) ? after : before).push_back(path);
  }
  for (const fs::path& path : before) add({"--tmpfs", path.string()});
  const char* bind = mode == SandboxMode::read_only ? "--ro-bind" : "--bind";
  add({bind, workspace.string(), workspace.string()});
  for (const fs::path& path : after) add({"--tmpfs", path.string()});
  add({"--chdir", workdir.string(), "--", "/bin/bash", "-c", command});
  result.env = scrubbed_environment(workspace, workdir, "/tmp");
  result.cwd = "/";
  return result;
}

SpawnedProcess spawn_sandboxed(const SandboxCommand& command, int stdout_fd, int stderr_fd) {
  if (command.argv.empty()) throw std::invalid_argument("spawn_sandboxed: no program");
  // Everything the child touches is prepared here: after fork it may only
  // make async-signal-safe calls.
  std::vector<std::string> args = command.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> envs = command.env;
  std::vector<char*> envp;
  for (std::string& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string cgroup = sb_make_cgroup(command.max_processes);
  const std::string cgroup_procs = cgroup.empty() ? std::string() : cgroup + "/cgroup.procs";
  SbFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (devnull.fd < 0) sb_throw_errno(errno, "open /dev/null");
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) sb_throw_errno(errno, "pipe");
  SbFd error_read(error_pipe[0]), error_write(error_pipe[1]);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    sb_remove_cgroup(cgroup);
    sb_throw_errno(err, "fork");
  }
  if (pid == 0) {
    auto fail = [&](int err) {
      ::write(error_write.fd, &err, sizeof err);
      ::_exit(127);
    };
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGXFSZ, SIGXCPU}) {
      ::sigaction(sig, &dfl, nullptr);
    }
    if (::setpgid(0, 0) != 0) fail(errno);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (!cgroup_procs.empty()) {
      const int fd = ::open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) fail(errno);
      ::close(fd);
    }
    auto limit = [&](int resource, std::uint64_t soft, std::uint64_t hard) {
      if (soft == 0) return;
      rlimit value{static_cast<rlim_t>(soft), static_cast<rlim_t>(hard)};
      if (::setrlimit(resource, &value) != 0) fail(errno);
    };
    limit(RLIMIT_CPU, command.cpu_seconds, command.cpu_seconds + 1);
    limit(RLIMIT_FSIZE, command.max_file_bytes, command.max_file_bytes);
    limit(RLIMIT_NPROC, command.max_processes, command.max_processes);
    limit(RLIMIT_AS, command.max_memory_bytes, command.max_memory_bytes);
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (::dup2(devnull.fd, STDIN_FILENO) < 0 || ::dup2(stdout_fd, STDOUT_FILENO) < 0 ||
        ::dup2(stderr_fd, STDERR_FILENO) < 0) {
      fail(errno);
    }
    if (::chdir(command.cwd.c_str()) != 0) fail(errno);
    // Whatever the daemon left inheritable closes at exec (the error pipe too).
    ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
    ::execve(argv[0], argv.data(), envp.data());
    fail(errno);
  }
  error_write.reset();
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(error_read.fd, &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    sb_remove_cgroup(cgroup);
    sb_throw_errno(child_errno, "cannot start " + command.argv.front());
  }
  SpawnedProcess process;
  process.pid = pid;
  process.cgroup = cgroup;
  process.sandboxed = command.sandboxed;
  process.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (process.pidfd < 0) {
    const int err = errno;
    kill_and_reap(process);
    sb_throw_errno(err, "pidfd_open");
  }
  ::fcntl(process.pidfd, F_SETFD, FD_CLOEXEC);
  return process;
}

void signal_process_tree(const SpawnedProcess& process, int signal, bool spare_leader) {
  if (process.pid <= 0) return;
  bool others = false;
  if (!process.cgroup.empty()) {
    for (pid_t pid : sb_cgroup_pids(process.cgroup)) {
      if (pid == process.pid) continue;
      ::kill(pid, signal);
      others = true;
    }
  }
  if (!spare_leader || !others) ::kill(-process.pid, signal);
}

int reap_process(SpawnedProcess& process) {
  int status = 0;
  if (process.pid > 0) {
    pid_t r;
    do {
      r = ::waitpid(process.pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    process.pid = -1;
  }
  if (!process.cgroup.empty()) {
    // What the leader left (a daemonized grandchild) goes with it.
    for (pid_t pid : sb_cgroup_pids(process.cgroup)) ::kill(pid, SIGKILL);
    sb_remove_cgroup(process.cgroup);
    process.cgroup.clear();
  }
  return status;
}

int kill_and_reap(SpawnedProcess& process) {
  if (process.pid <= 0) return 0;
  if (process.sandboxed && !process.cgroup.empty()) {
    // The sandbox first, then give bwrap half a second to reap it and exit.
    signal_process_tree(process, SIGKILL, true);
    for (int i = 0; i < 250; ++i) {
      int status = 0;
      if (::waitpid(process.pid, &status, WNOHANG) == process.pid) {
        process.pid = -1;
        reap_process(process);
        return status;
      }
      ::usleep(2000);
    }
  }
  signal_process_tree(process, SIGKILL);
  return reap_process(process);
}

bool sandbox_available(const SandboxOptions& options, std::string* why) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, bool>, std::pair<bool, std::string>> verdicts;
  const auto key = std::make_pair(options.bwrap, options.network);
  std::lock_guard lock(mutex);
  auto found = verdicts.find(key);
  if (found == verdicts.end()) {
    std::pair<bool, std::string> verdict;
    const std::string bwrap = sb_find_program(options.bwrap);
    if (bwrap.empty()) {
      verdict = {false, "bubblewrap (" + options.bwrap + ") not found; install the bubblewrap package"};
    } else {
      std::vector<std::string> argv = sb_bwrap_base(bwrap, options.network);
      for (const char* arg : {"--tmpfs", "/tmp", "--", "/bin/true"}) argv.emplace_back(arg);
      SbProbe probe = sb_run_probe(argv);
      verdict = {probe.ok, probe.ok ? std::string() : bwrap + " cannot create the sandbox here: " + probe.output};
    }
    found = verdicts.emplace(key, std::move(verdict)).first;
  }
  if (why != nullptr) *why = found->second.second;
  return found->second.first;
}

std::string sandbox_report(const SandboxOptions& options) {
  std::ostringstream out;
  auto yes_no = [](const SbProbe& r) { return r.ok ? std::string("yes") : "no (" + r.output + ")"; };
  out << "uid: " << ::getuid() << (::getuid() == 0 ? " (root: RLIMIT_NPROC does not bind)" : "") << "\n";
  {
    std::ifstream in("/proc/sys/user/max_user_namespaces");
    std::string value;
    in >> value;
    out << "user.max_user_namespaces: " << (value.empty() ? "unknown" : value) << "\n";
  }
  const std::string bwrap = sb_find_program(options.bwrap);
  out << "bwrap: " << (bwrap.empty() ? "not found (" + options.bwrap + ")" : bwrap) << "\n";
  if (!bwrap.empty()) {
    out << "bwrap runs (--ro-bind / / true): " << yes_no(sb_run_probe({bwrap, "--ro-bind", "/", "/", "/bin/true"}))
        << "\n";
    out << "user namespace (--unshare-user): "
        << yes_no(sb_run_probe({bwrap, "--unshare-user", "--ro-bind", "/", "/", "/bin/true"})) << "\n";
    out << "network isolation (--unshare-net): "
        << yes_no(sb_run_probe({bwrap, "--unshare-net", "--ro-bind", "/", "/", "/bin/true"})) << "\n";
  }
  const std::string cgroup = sb_pids_cgroup_base();
  out << "pids cgroup (per-command process limit): " << (cgroup.empty() ? "unavailable" : cgroup) << "\n";
  // landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
  const long abi = ::syscall(444 /* SYS_landlock_create_ruleset */, nullptr, 0, 1U << 0);
  out << "Landlock ABI: "
      << (abi >= 0 ? std::to_string(abi) : std::string("unavailable (") + std::strerror(errno) + ")")
      << " (not used)\n";
  std::string why;
  const bool ok = sandbox_available(options, &why);
  out << "sandbox (workspace-write, network " << (options.network ? "on" : "off")
      << "): " << (ok ? "available" : "UNAVAILABLE: " + why) << "\n";
  return out.str();
}

}  // namespace harnessd::tools
