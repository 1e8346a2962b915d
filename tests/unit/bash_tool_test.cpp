// The bash tool, its sandbox and background tasks, run for real: commands
// in a temporary workspace under bubblewrap, escape attempts that must fail
// and leave nothing behind, kills that must leave no process.
#include "llm/cancel_scope.hpp"
#include "tools/builtin.hpp"
#include "tools/read_tracker.hpp"
#include "tools/sandbox.hpp"
#include "tools/task_table.hpp"
#include "tools/tool_pool.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace harnessd;
namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

std::string bash_test_random() {
  std::random_device rd;
  return std::to_string(rd()) + std::to_string(::getpid());
}

/// Processes anywhere on the host whose command line holds `marker`.
int processes_with(const std::string& marker) {
  int count = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    if (std::stoi(name) == ::getpid()) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(marker) != std::string::npos) ++count;
  }
  return count;
}

/// Children of this process (a zombie counts): there must be none left.
int children_of_this_process() {
  int count = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid()) ++count;
  }
  return count;
}

/// Waits (at most `limit`) until no process holds `marker`.
bool gone_within(const std::string& marker, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (processes_with(marker) > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

struct BashFixture {
  // base/sessions is the session root, base/workspaces/ws the workspace,
  // base/workspaces/other another session's. Not under /tmp, which the
  // sandbox hides anyway, so that the hiding of these paths is what is tested.
  fs::path base = fs::path(fs::exists("/var/tmp") ? "/var/tmp" : "/tmp") / ("harnessd-bash-test-" + bash_test_random());
  fs::path sessions = base / "sessions";
  fs::path workspaces = base / "workspaces";
  fs::path ws = workspaces / "ws";
  fs::path other = workspaces / "other";

  asio::io_context io;
  tools::ToolPool pool{2};
  tools::ReadTracker reads;
  tools::SandboxOptions options;
  llm::CancelScope cancel;
  std::unique_ptr<tools::Workspace> workspace;
  std::unique_ptr<tools::TaskTable> tasks = std::make_unique<tools::TaskTable>();
  tools::SandboxMode mode = tools::SandboxMode::workspace_write;

  BashFixture() {
    fs::create_directories(ws / "sub");
    fs::create_directories(other);
    fs::create_directories(sessions);
    std::ofstream(sessions / "secret.txt") << "session-secret\n";
    std::ofstream(other / "secret.txt") << "other-secret\n";
    workspace = std::make_unique<tools::Workspace>(ws, false);
    options.hidden_paths = {sessions.string(), workspaces.string()};
  }
  ~BashFixture() {
    tasks.reset();
    std::error_code ec;
    fs::remove_all(base, ec);
  }

  tools::ToolContext context() {
    return tools::ToolContext{.workspace = *workspace,
                              .sandbox = mode,
                              .cancel = cancel,
                              .pool = pool,
                              .reads = reads,
                              .tasks = *tasks,
                              .emit = {},
                              .delegate = {},
                              .sandbox_options = options};
  }

  static asio::awaitable<tools::ToolResult> call(tools::Tool* tool, json::object args, tools::ToolContext context) {
    tools::ToolResult result = co_await tool->run(args, context);
    co_return result;
  }

  tools::ToolResult run(tools::Tool& tool, json::object args) {
    auto done = asio::co_spawn(asio::make_strand(io), call(&tool, std::move(args), context()), asio::use_future);
    // Until the call returns: a background task's exit watch stays pending.
    io.restart();
    while (done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) io.run_one();
    return done.get();
  }

  tools::ToolResult bash(std::string command, json::object extra = {}) {
    static const std::unique_ptr<tools::Tool> tool = tools::make_bash_tool();
    extra["command"] = command;
    extra["description"] = "test";
    return run(*tool, std::move(extra));
  }
};

bool sandbox_here() {
  std::string why;
  tools::SandboxOptions options;
  const bool ok = tools::sandbox_available(options, &why);
  if (!ok) MESSAGE("no sandbox on this host, sandboxed cases skipped: " << why);
  return ok;
}

}  // namespace

TEST_CASE("sandbox: report and secret names") {
  CHECK(tools::is_secret_env_name("OPENAI_API_KEY"));
  CHECK(tools::is_secret_env_name("harnessd_token"));
  CHECK(tools::is_secret_env_name("DB_PASSWORD"));
  CHECK(tools::is_secret_env_name("AWS_SECRET_ACCESS_KEY"));
  CHECK_FALSE(tools::is_secret_env_name("PATH"));
  const std::string report = tools::sandbox_report(tools::SandboxOptions{});
  MESSAGE(report);
  CHECK(report.find("bwrap:") != std::string::npos);
  CHECK(report.find("Landlock ABI:") != std::string::npos);
}

TEST_CASE("sandbox: a missing bwrap fails closed with SANDBOX_UNAVAILABLE") {
  BashFixture f;
  f.options.bwrap = "/nonexistent/bwrap";
  tools::ToolResult result = f.bash("echo hi");
  REQUIRE(result.error);
  CHECK(result.error->code == "SANDBOX_UNAVAILABLE");
  CHECK(result.text.find("not found") != std::string::npos);
  // danger-full-access needs no sandbox.
  f.mode = tools::SandboxMode::danger_full_access;
  result = f.bash("echo hi");
  CHECK_FALSE(result.error);
  CHECK(result.text == "hi\n[exit code: 0]");
}

TEST_CASE("bash: stdout, stderr, exit code and workdir") {
  if (!sandbox_here()) return;
  BashFixture f;
  tools::ToolResult result = f.bash("echo hello; echo oops >&2; exit 3");
  CHECK_FALSE(result.error);
  CHECK(result.text == "hello\noops\n[exit code: 3]");
  CHECK(result.meta.at("exitCode").as_int64() == 3);
  CHECK(result.meta.at("timedOut").as_bool() == false);
  CHECK(result.meta.at("stdoutBytes").to_number<std::int64_t>() == 6);
  CHECK(result.meta.at("stderrBytes").to_number<std::int64_t>() == 5);

  result = f.bash("pwd", json::object{{"workdir", "sub"}});
  CHECK(result.text == (f.ws / "sub").string() + "\n[exit code: 0]");
  result = f.bash("pwd", json::object{{"workdir", "../other"}});
  REQUIRE(result.error);
  CHECK(result.error->code == "PATH_OUTSIDE_WORKSPACE");
  result = f.bash("true", json::object{{"workdir", "missing"}});
  REQUIRE(result.error);
  CHECK(result.error->code == "NOT_FOUND");
  CHECK(children_of_this_process() == 0);
}

TEST_CASE("bash: the environment is scrubbed of secrets") {
  if (!sandbox_here()) return;
  ::setenv("FOO_TOKEN", "leaked-token", 1);
  ::setenv("MY_API_KEY", "leaked-key", 1);
  ::setenv("HARNESSD_TEST_PLAIN", "visible", 1);
  BashFixture f;
  tools::ToolResult result = f.bash("echo \"t=${FOO_TOKEN:-unset} k=${MY_API_KEY:-unset} p=$HARNESSD_TEST_PLAIN h=$HOME\"; env | grep -c leaked");
  ::unsetenv("FOO_TOKEN");
  ::unsetenv("MY_API_KEY");
  ::unsetenv("HARNESSD_TEST_PLAIN");
  CHECK(result.text == "t=unset k=unset p=visible h=" + f.ws.string() + "\n0\n[exit code: 1]");
}

TEST_CASE("bash: a timeout kills the whole process tree") {
  if (!sandbox_here()) return;
  BashFixture f;
  const std::string marker = "harnessd-timeout-" + bash_test_random();
  const auto start = std::chrono::steady_clock::now();
  tools::ToolResult result =
      f.bash("(exec -a " + marker + "-a sleep 60) & echo started; exec -a " + marker + "-b sleep 60",
             json::object{{"timeoutMs", 500}});
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK_FALSE(result.error);
  CHECK(result.text == "started\n[timed out after 500 ms]");
  CHECK(result.meta.at("timedOut").as_bool());
  CHECK(took < std::chrono::seconds(5));
  CHECK(gone_within(marker, std::chrono::seconds(1)));
  CHECK(children_of_this_process() == 0);
}

TEST_CASE("bash: a cancelled turn kills its command within 1 s") {
  if (!sandbox_here()) return;
  for (tools::SandboxMode mode : {tools::SandboxMode::workspace_write, tools::SandboxMode::danger_full_access}) {
    BashFixture f;
    f.mode = mode;
    const std::string marker = "harnessd-cancel-" + bash_test_random();
    asio::steady_timer timer(f.io, std::chrono::milliseconds(400));
    std::chrono::steady_clock::time_point cancelled_at;
    timer.async_wait([&](boost::system::error_code) {
      cancelled_at = std::chrono::steady_clock::now();
      f.cancel.cancel("test");
    });
    tools::ToolResult result =
        f.bash("(trap '' TERM; exec -a " + marker + "-a sleep 60) & exec -a " + marker + "-b sleep 60");
    const auto took = std::chrono::steady_clock::now() - cancelled_at;
    REQUIRE(result.error);
    CHECK(result.error->code == "CANCELLED");
    CHECK(took < std::chrono::seconds(1));
    CHECK(gone_within(marker, std::chrono::seconds(1)));
    CHECK(children_of_this_process() == 0);
  }
}

TEST_CASE("bash: output past 64 KiB per stream is spilled to a file") {
  if (!sandbox_here()) return;
  BashFixture f;
  tools::ToolResult result = f.bash("head -c 200000 /dev/zero | tr '\\0' a; echo err >&2");
  CHECK_FALSE(result.error);
  CHECK(result.meta.at("stdoutBytes").to_number<std::int64_t>() == 200000);
  REQUIRE(result.meta.contains("stdoutFile"));
  const std::string file(result.meta.at("stdoutFile").as_string());
  CHECK(file.rfind(".harnessd/spill/", 0) == 0);
  CHECK(fs::file_size(f.ws / file) == 200000 - 65536);
  CHECK(result.text.find("the rest is in " + file) != std::string::npos);
  CHECK(result.text.find(std::string(65536, 'a')) == 0);
  CHECK(result.text.find(std::string(65537, 'a')) == std::string::npos);
  CHECK(result.text.find("err\n[exit code: 0]") != std::string::npos);
}

TEST_CASE("sandbox: escapes fail and leave nothing behind") {
  if (!sandbox_here()) return;
  BashFixture f;
  const fs::path outside = f.base / "outside.txt";
  const std::string host_tmp = "/tmp/harnessd-escape-" + bash_test_random();

  // The workspace is writable.
  tools::ToolResult result = f.bash("echo inside > inside.txt && cat inside.txt");
  CHECK(result.text == "inside\n[exit code: 0]");
  CHECK(fs::exists(f.ws / "inside.txt"));

  // Writing outside: read-only, or a tmpfs that is gone afterwards.
  for (const std::string& target :
       {outside.string(), (f.workspaces / "escape.txt").string(), (f.sessions / "escape.txt").string(),
        (f.other / "escape.txt").string(), host_tmp, std::string("/etc/harnessd-escape"),
        std::string("/usr/harnessd-escape")}) {
    f.bash("echo x > '" + target + "'; mkdir -p '" + target + ".d'");
    CHECK_MESSAGE(!fs::exists(target), target);
    CHECK_MESSAGE(!fs::exists(target + ".d"), target);
  }
  result = f.bash("echo x > ../escape.txt");
  CHECK_FALSE(fs::exists(f.workspaces / "escape.txt"));
  result = f.bash("echo x > '" + outside.string() + "'");
  CHECK(result.text.find("Read-only file system") != std::string::npos);

  // The session root and the other workspaces look empty.
  result = f.bash("cat '" + (f.other / "secret.txt").string() + "'; cat '" + (f.sessions / "secret.txt").string() +
                  "'; ls -A '" + f.sessions.string() + "' '" + f.other.string() + "' | grep -c secret");
  CHECK(result.text.find("other-secret") == std::string::npos);
  CHECK(result.text.find("session-secret") == std::string::npos);
  CHECK(result.text.find("0\n") == 0);

  // A symlink planted in the workspace does not lead a write outside.
  result = f.bash("ln -s '" + f.base.string() + "' link && echo x > link/through-link.txt; ln -s '" + outside.string() +
                  "' link2 && echo x > link2");
  CHECK_FALSE(fs::exists(f.base / "through-link.txt"));
  CHECK_FALSE(fs::exists(outside));

  // Nothing is left running or unreaped.
  CHECK(children_of_this_process() == 0);
}

TEST_CASE("sandbox: no network unless --sandbox-network") {
  if (!sandbox_here()) return;
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener, 8) == 0);
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string port = std::to_string(ntohs(address.sin_port));
  const std::string connect = "exec 3<>/dev/tcp/127.0.0.1/" + port + " && echo connected";

  BashFixture f;
  tools::ToolResult result = f.bash(connect, json::object{{"timeoutMs", 10000}});
  CHECK(result.text.find("connected\n") == std::string::npos);
  CHECK(result.meta.at("exitCode").as_int64() != 0);
  // The same command reaches the listener outside the sandbox: the check
  // above is about the sandbox, not the listener.
  f.mode = tools::SandboxMode::danger_full_access;
  result = f.bash(connect, json::object{{"timeoutMs", 10000}});
  CHECK(result.text.find("connected\n") == 0);
  f.mode = tools::SandboxMode::workspace_write;
  f.options.network = true;
  result = f.bash(connect, json::object{{"timeoutMs", 10000}});
  CHECK(result.text.find("connected\n") == 0);
  ::close(listener);
}

TEST_CASE("sandbox: process and file size limits") {
  if (!sandbox_here()) return;
  BashFixture f;
  // A bounded fork loop: at most 100 children, each gone when the command ends.
  const bool root = ::getuid() == 0;
  const bool pids_cgroup = fs::exists("/sys/fs/cgroup/pids/cgroup.procs") && ::access("/sys/fs/cgroup/pids", W_OK) == 0;
  if (root && !pids_cgroup) {
    MESSAGE("running as root without a pids cgroup: RLIMIT_NPROC does not bind root, fork limit not tested");
  } else {
    f.options.max_processes = 24;
    const std::string marker = "harnessd-fork-" + bash_test_random();
    tools::ToolResult result = f.bash(
        "perl -e 'my $n = 0; for (1..100) { my $p = fork(); last unless defined $p; if ($p == 0) { exec {\"sleep\"} \"" +
            marker + "\", \"30\"; exit 0 } $n++ } print \"forked $n\\n\"'",
        json::object{{"timeoutMs", 20000}});
    MESSAGE(result.text);
    const auto at = result.text.find("forked ");
    REQUIRE(at != std::string::npos);
    const int forked = std::stoi(result.text.substr(at + 7));
    CHECK(forked < 24);
    CHECK(gone_within(marker, std::chrono::seconds(2)));
  }

  // A 10 GB write stops at max_file_bytes.
  f.options.max_file_bytes = 1 << 20;
  tools::ToolResult result = f.bash("head -c 10000000000 /dev/zero > big.bin; echo status=$?");
  CHECK(result.text.find("status=153") != std::string::npos);  // 128 + SIGXFSZ
  REQUIRE(fs::exists(f.ws / "big.bin"));
  CHECK(fs::file_size(f.ws / "big.bin") <= (1u << 20));
  CHECK(children_of_this_process() == 0);
}

TEST_CASE("sandbox: read-only mode makes the workspace read-only too") {
  if (!sandbox_here()) return;
  BashFixture f;
  f.mode = tools::SandboxMode::read_only;
  std::ofstream(f.ws / "readme.txt") << "readable\n";
  tools::ToolResult result = f.bash("cat readme.txt; echo x > new.txt; echo y >> readme.txt");
  CHECK(result.text.find("readable\n") == 0);
  CHECK(result.text.find("Read-only file system") != std::string::npos);
  CHECK_FALSE(fs::exists(f.ws / "new.txt"));
  std::ifstream in(f.ws / "readme.txt");
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "readable\n");
}

TEST_CASE("task: background start, task_output, task_list, task_kill") {
  if (!sandbox_here()) return;
  BashFixture f;
  auto task_output = tools::make_task_output_tool();
  auto task_list = tools::make_task_list_tool();
  auto task_kill = tools::make_task_kill_tool();
  CHECK(task_output->read_only());
  CHECK(task_list->read_only());
  CHECK_FALSE(task_kill->read_only());

  tools::ToolResult started =
      f.bash("echo begin; echo warn >&2; sleep 0.3; echo end; exit 4", json::object{{"run_in_background", true}});
  CHECK_FALSE(started.error);
  const std::string id(started.meta.at("taskId").as_string());
  CHECK(started.text.find(id) != std::string::npos);

  tools::ToolResult output =
      f.run(*task_output, json::object{{"task_id", id}, {"wait", true}, {"timeout_ms", 10000}});
  CHECK_FALSE(output.error);
  CHECK(output.text == "begin\nwarn\nend\n[" + id + ": exited, exit code 4]");
  CHECK(output.meta.at("state").as_string() == "exited");
  CHECK(output.meta.at("exitCode").as_int64() == 4);

  const std::string marker = "harnessd-task-" + bash_test_random();
  started = f.bash("echo up; exec -a " + marker + " sleep 60", json::object{{"run_in_background", true}});
  const std::string second(started.meta.at("taskId").as_string());
  // Without wait: at once, still running.
  output = f.run(*task_output, json::object{{"task_id", second}, {"wait", true}, {"timeout_ms", 300}});
  CHECK_MESSAGE(output.meta.at("state").as_string() == "running", output.text);

  tools::ToolResult list = f.run(*task_list, json::object{});
  CHECK(list.meta.at("tasks").as_array().size() == 2);
  CHECK(list.text.find(id + "\texited") != std::string::npos);
  CHECK(list.text.find(second + "\trunning") != std::string::npos);

  tools::ToolResult killed = f.run(*task_kill, json::object{{"task_id", second}, {"reason", "test over"}});
  CHECK_FALSE(killed.error);
  CHECK(killed.meta.at("state").as_string() == "killed");
  CHECK(killed.text.find("test over") != std::string::npos);
  CHECK(gone_within(marker, std::chrono::seconds(1)));

  tools::ToolResult missing = f.run(*task_output, json::object{{"task_id", "task-99"}});
  REQUIRE(missing.error);
  CHECK(missing.error->code == "TASK_NOT_FOUND");
  missing = f.run(*task_kill, json::object{{"task_id", "task-99"}});
  REQUIRE(missing.error);
  CHECK(missing.error->code == "TASK_NOT_FOUND");
  CHECK(children_of_this_process() == 0);
}

TEST_CASE("task: destroying the table kills its tasks") {
  if (!sandbox_here()) return;
  BashFixture f;
  const std::string marker = "harnessd-table-" + bash_test_random();
  for (tools::SandboxMode mode : {tools::SandboxMode::workspace_write, tools::SandboxMode::danger_full_access}) {
    f.mode = mode;
    tools::ToolResult started = f.bash("(exec -a " + marker + "-child sleep 60) & exec -a " + marker + " sleep 60",
                                       json::object{{"run_in_background", true}});
    CHECK_FALSE(started.error);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(processes_with(marker) > 0);
  f.tasks.reset();
  CHECK(gone_within(marker, std::chrono::seconds(1)));
  CHECK(children_of_this_process() == 0);
  f.tasks = std::make_unique<tools::TaskTable>();
}
