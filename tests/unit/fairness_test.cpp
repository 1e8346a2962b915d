// What keeps a light session fast beside busy ones: the one-pass Wakeup,
// the BulkLane's slices and their fair order, admission's line for sessions
// back after a pause, and the InstructionCache that spares each turn a hop
// to the setup thread.
#include "harness/admission.hpp"
#include "harness/bulk_lane.hpp"
#include "harness/instruction_cache.hpp"
#include "llm/cancel_scope.hpp"
#include "util/wakeup.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace harnessd;
namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

// A lane where no session skips the line, whatever its pauses.
constexpr auto no_skip = std::chrono::nanoseconds::max();

void busy_for(std::chrono::microseconds time) {
  const auto until = std::chrono::steady_clock::now() + time;
  while (std::chrono::steady_clock::now() < until) {
  }
}

asio::awaitable<void> wait_then_log(std::shared_ptr<util::Wakeup> wakeup, std::vector<std::string>& log) {
  co_await wakeup->wait();
  log.emplace_back("woken");
}

/// `slices` slices of `work` each, all in the lane, each slice logged.
asio::awaitable<void> bulk(harness::BulkLane& lane, std::shared_ptr<harness::BulkLane::Flow> flow, int slices,
                           std::chrono::microseconds work, std::vector<std::string>& log, std::string name) {
  for (int i = 0; i < slices; ++i) {
    co_await lane.enter(flow);
    busy_for(work);
    log.push_back(name);
  }
}

/// `sessions` sessions on strands of their own, each wanting `slices` slices.
void spawn_bulk(asio::io_context& io, harness::BulkLane& lane, int sessions, int slices,
                std::chrono::microseconds work, std::vector<std::string>& log, const std::string& name) {
  for (int i = 0; i < sessions; ++i) {
    auto flow = std::make_shared<harness::BulkLane::Flow>();
    asio::co_spawn(asio::make_strand(io), bulk(lane, flow, slices, work, log, name), asio::detached);
  }
}

asio::awaitable<void> one_slice(harness::BulkLane& lane, std::shared_ptr<harness::BulkLane::Flow> flow,
                                std::vector<std::string>& log, std::string name) {
  co_await lane.enter(flow);
  log.push_back(name);
}

std::size_t index_of(const std::vector<std::string>& log, const std::string& entry) {
  return static_cast<std::size_t>(std::find(log.begin(), log.end(), entry) - log.begin());
}

/// Waits for a running slot; logs `name` once admitted, `name` + " cancelled" if not.
asio::awaitable<void> admit(harness::Admission& admission, llm::CancelScope& scope, bool ahead,
                            std::vector<std::string>& log, std::string name) {
  const harness::Admission::Result result = co_await admission.acquire(scope, ahead);
  log.push_back(result == harness::Admission::Result::admitted ? name : name + " cancelled");
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("harnessd-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

}  // namespace

TEST_CASE("a Wakeup resumes its waiter in one pass of the event loop") {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  auto wakeup = util::Wakeup::create(strand);
  std::vector<std::string> log;
  asio::co_spawn(strand, wait_then_log(wakeup, log), asio::detached);
  io.poll();  // the waiter is waiting
  asio::post(io, [&] {
    wakeup->notify();
    asio::post(io, [&] { log.emplace_back("queued after the notify"); });
  });
  io.run();
  REQUIRE(log.size() == 2);
  CHECK(log[0] == "woken");
}

TEST_CASE("a Wakeup notified before the wait, from another thread, is not lost") {
  asio::io_context io;
  auto strand = asio::make_strand(io);
  auto wakeup = util::Wakeup::create(strand);
  std::thread([wakeup] { wakeup->notify(); }).join();
  std::vector<std::string> log;
  asio::co_spawn(strand, wait_then_log(wakeup, log), asio::detached);
  io.run();
  CHECK(log == std::vector<std::string>{"woken"});
}

TEST_CASE("the bulk lane lets a handler through ahead of a long line of bulk") {
  asio::io_context io;
  harness::BulkLane lane(1, no_skip);
  std::vector<std::string> log;
  spawn_bulk(io, lane, 50, 4, std::chrono::microseconds(0), log, "bulk");
  io.poll_one();
  // Posted while 50 turns want 200 slices: it waits for the slice running
  // now and the one granted next, not for the line. Without the lane each
  // of the 50 would have a handler queued ahead of it.
  asio::post(io, [&] { log.emplace_back("light"); });
  io.run();
  REQUIRE(log.size() == 201);
  CHECK(index_of(log, "light") <= 3);
}

TEST_CASE("the bulk lane serves a session that used little before those that use it all the time") {
  asio::io_context io;
  harness::BulkLane lane(1, no_skip);
  std::vector<std::string> log;
  spawn_bulk(io, lane, 8, 20, std::chrono::microseconds(200), log, "heavy");
  // Let the heavy ones run a while, then a new session asks for one slice.
  while (log.size() < 40) io.run_one();
  const std::size_t asked_at = log.size();
  asio::co_spawn(asio::make_strand(io),
                 one_slice(lane, std::make_shared<harness::BulkLane::Flow>(), log, "light"), asio::detached);
  io.run();
  REQUIRE(log.size() == 161);
  // In FIFO order it would come after the 8 heavy waiters already in line.
  CHECK(index_of(log, "light") <= asked_at + 2);
}

TEST_CASE("a session back after a pause skips the bulk lane's line once") {
  asio::io_context io;
  harness::BulkLane lane(1, std::chrono::milliseconds(50));
  std::vector<std::string> log;
  spawn_bulk(io, lane, 8, 40, std::chrono::microseconds(100), log, "heavy");
  while (log.size() < 40) io.run_one();

  // Slices of others logged while each of its enter() calls waited.
  struct Light {
    static asio::awaitable<void> run(harness::BulkLane& lane, std::shared_ptr<harness::BulkLane::Flow> flow,
                                     std::vector<std::string>& log, std::vector<std::size_t>& waited) {
      for (int i = 0; i < 2; ++i) {
        const std::size_t before = log.size();
        co_await lane.enter(flow);
        waited.push_back(log.size() - before);
        log.emplace_back("light");
      }
    }
  };
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  auto paused = std::make_shared<harness::BulkLane::Flow>();
  paused->at_ns = now_ns - 1'000'000'000;  // its last slice, a second ago
  auto busy = std::make_shared<harness::BulkLane::Flow>();
  busy->at_ns = now_ns;  // a slice just now
  std::vector<std::size_t> paused_waited, new_waited, busy_waited;
  asio::co_spawn(asio::make_strand(io), Light::run(lane, paused, log, paused_waited), asio::detached);
  asio::co_spawn(asio::make_strand(io), Light::run(lane, std::make_shared<harness::BulkLane::Flow>(), log, new_waited),
                 asio::detached);
  asio::co_spawn(asio::make_strand(io), Light::run(lane, busy, log, busy_waited), asio::detached);
  io.run();

  // The first slice of a paused or a new session ran without a wait; the
  // second waited behind the slice granted before it. A session with a
  // recent slice waits from the first.
  REQUIRE(paused_waited.size() == 2);
  REQUIRE(new_waited.size() == 2);
  REQUIRE(busy_waited.size() == 2);
  CHECK(paused_waited[0] == 0);
  CHECK(new_waited[0] == 0);
  CHECK(paused_waited[1] >= 1);
  CHECK(new_waited[1] >= 1);
  CHECK(busy_waited[0] >= 1);
  CHECK(lane.waiting() == 0);
}

TEST_CASE("a prompt back after a pause is admitted ahead of busy sessions' prompts, and never starves them") {
  asio::io_context io;
  const auto work = asio::make_work_guard(io);  // io.poll() runs until the test ends
  harness::Admission admission(1, 16);
  std::vector<std::string> log;
  std::vector<std::unique_ptr<llm::CancelScope>> scopes;
  const auto prompt = [&](bool ahead, const std::string& name) {
    scopes.push_back(std::make_unique<llm::CancelScope>());
    asio::co_spawn(io, admit(admission, *scopes.back(), ahead, log, name), asio::detached);
    io.poll();
  };
  prompt(false, "running");
  REQUIRE(log == std::vector<std::string>{"running"});
  for (const char* name : {"busy 1", "busy 2", "busy 3"}) prompt(false, name);
  for (const char* name : {"paused 1", "paused 2", "paused 3"}) prompt(true, name);
  CHECK(admission.queued() == 6);

  // A cancelled prompt leaves its own line.
  scopes.back()->cancel("cancelled");
  io.poll();
  CHECK(log.back() == "paused 3 cancelled");
  CHECK(admission.queued() == 5);

  // Each slot given back goes to the longest waiter of the line whose turn
  // it is: the paused sessions' line first, then the lines take turns.
  log.clear();
  for (int i = 0; i < 5; ++i) {
    admission.release();
    io.poll();
  }
  CHECK(log == std::vector<std::string>{"paused 1", "busy 1", "paused 2", "busy 2", "busy 3"});
  CHECK(admission.queued() == 0);
  CHECK(admission.running() == 1);
}

TEST_CASE("the bulk lane runs at most its slots' slices at once, across threads") {
  asio::io_context io;
  harness::BulkLane lane(2, no_skip);
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::atomic<int> done{0};
  struct Probe {
    static asio::awaitable<void> run(harness::BulkLane& lane, std::atomic<int>& inside, std::atomic<int>& most,
                                     std::atomic<int>& done) {
      auto flow = std::make_shared<harness::BulkLane::Flow>();
      for (int i = 0; i < 20; ++i) {
        co_await lane.enter(flow);
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        busy_for(std::chrono::microseconds(50));
        --inside;
      }
      ++done;
    }
  };
  for (int i = 0; i < 16; ++i) asio::co_spawn(asio::make_strand(io), Probe::run(lane, inside, most, done), asio::detached);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&io] { io.run(); });
  for (auto& thread : threads) thread.join();
  CHECK(done.load() == 16);
  CHECK(most.load() <= 2);
  CHECK(lane.waiting() == 0);
}

TEST_CASE("coroutines still in the bulk lane when the event loop goes are freed") {
  auto lane = std::make_unique<harness::BulkLane>(1, no_skip);
  std::vector<std::string> log;
  {
    asio::io_context io;
    spawn_bulk(io, *lane, 5, 3, std::chrono::microseconds(0), log, "bulk");
    io.poll_one();
    lane.reset();  // the registry goes first; the waiters' frames go with the io_context
  }
  CHECK(log.size() < 15);
}

TEST_CASE("the instruction cache answers until AGENTS.md changes") {
  const fs::path root = fresh_dir("instructions");
  const fs::path cwd = root / "project";
  fs::create_directories(cwd);
  write_file(root / "AGENTS.md", "root rules");
  harness::InstructionCache cache;
  CHECK_FALSE(cache.find(root, cwd));
  std::vector<harness::InstructionFile> files = cache.read(root, cwd);
  REQUIRE(files.size() == 1);
  auto cached = cache.find(root, cwd);
  REQUIRE(cached);
  CHECK((*cached)[0].content == "root rules");

  // Another file of the directory changing does not matter.
  write_file(root / "notes.txt", "unrelated");
  CHECK(cache.find(root, cwd));

  SUBCASE("an edit") {
    write_file(root / "AGENTS.md", "new rules");
    CHECK_FALSE(cache.find(root, cwd));
    files = cache.read(root, cwd);
    REQUIRE(files.size() == 1);
    CHECK(files[0].content == "new rules");
    CHECK(cache.find(root, cwd));
  }
  SUBCASE("a file added further down") {
    write_file(cwd / "AGENTS.md", "project rules");
    CHECK_FALSE(cache.find(root, cwd));
    CHECK(cache.read(root, cwd).size() == 2);
  }
  SUBCASE("a removal") {
    fs::remove(root / "AGENTS.md");
    CHECK_FALSE(cache.find(root, cwd));
    CHECK(cache.read(root, cwd).empty());
  }
  SUBCASE("a rename over it") {
    write_file(root / "staged.md", "renamed rules");
    fs::rename(root / "staged.md", root / "AGENTS.md");
    CHECK_FALSE(cache.find(root, cwd));
  }
  fs::remove_all(root);
}

TEST_CASE("the instruction cache sees directories of the chain appear") {
  const fs::path base = fresh_dir("instructions-missing");
  const fs::path root = base / "workspaces";
  const fs::path cwd = root / "session-1";
  harness::InstructionCache cache;

  SUBCASE("the session's directory") {
    fs::create_directories(root);
    CHECK(cache.read(root, cwd).empty());
    CHECK(cache.find(root, cwd));
    fs::create_directories(cwd);
    CHECK_FALSE(cache.find(root, cwd));
  }
  SUBCASE("the workspace root itself") {
    CHECK(cache.read(root, cwd).empty());
    CHECK(cache.find(root, cwd));
    fs::create_directories(root);
    CHECK_FALSE(cache.find(root, cwd));
    CHECK(cache.read(root, cwd).empty());
    write_file(root / "AGENTS.md", "rules");
    CHECK_FALSE(cache.find(root, cwd));
    CHECK(cache.read(root, cwd).size() == 1);
  }
  fs::remove_all(base);
}
