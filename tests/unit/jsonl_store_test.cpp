#include "store/errc.hpp"
#include "store/jsonl_store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

using namespace harnessd::store;
namespace fs = std::filesystem;

namespace {

void append_one(SessionLog& log, std::string_view event) {
  const std::string_view events[] = {event};
  log.append(events, LogPosition{});
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("harnessd-store-test-" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

SessionHeader header_for(std::string id) {
  SessionHeader h;
  h.id = std::move(id);
  h.created_at_ms = 1;
  return h;
}

/// Event `seq` of the paging tests: sizes vary, some lines are long.
std::string paged_event(std::int64_t seq) {
  const std::size_t pad = seq % 97 == 0 ? 20000 : static_cast<std::size_t>(seq % 13) * 30;
  return R"({"type":"x","seq":)" + std::to_string(seq) + R"(,"pad":")" + std::string(pad, 'p') + "\"}";
}

void append_events(SessionLog& log, std::int64_t from, std::int64_t to) {
  std::vector<std::string> texts;
  for (std::int64_t seq = from; seq < to; ++seq) texts.push_back(paged_event(seq));
  const std::vector<std::string_view> views(texts.begin(), texts.end());
  log.append(views, LogPosition{.last_seq = to - 1});
}

std::optional<EventPage> read_page(JsonlStore& store, const std::string& id, std::int64_t after_seq,
                                   std::size_t limit, std::size_t max_bytes = 1 << 20) {
  boost::asio::io_context io;
  auto future = boost::asio::co_spawn(io, store.read_events(id, after_seq, limit, max_bytes), boost::asio::use_future);
  io.run();
  return future.get();
}

/// Pages through the log of `id` from the start: every event once, in
/// order, each as written. Returns the events seen.
std::int64_t page_through(JsonlStore& store, const std::string& id, std::size_t limit, std::int64_t expected) {
  std::int64_t after = -1;
  for (;;) {
    std::optional<EventPage> page = read_page(store, id, after, limit);
    REQUIRE(page);
    for (const std::string& event : page->events) {
      REQUIRE(event == paged_event(after + 1));
      ++after;
    }
    if (!page->more) break;
    REQUIRE(!page->events.empty());
  }
  CHECK(after == expected - 1);
  return after + 1;
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("session ids map to distinct, safe file names") {
  CHECK(session_file_name("abc-DEF_1.2") == "abc-DEF_1.2.jsonl");
  CHECK(session_file_name("a/b") == "a%2Fb.jsonl");
  CHECK(session_file_name("..") == "%2E..jsonl");
  CHECK(session_file_name(".hidden") == "%2Ehidden.jsonl");
  CHECK(session_file_name("a%2Fb") == "a%252Fb.jsonl");  // '%' itself is encoded: no collisions
  CHECK(session_file_name("\xE4\xBD\xA0") == "%E4%BD%A0.jsonl");
  const std::string long_id(256, '/');
  const std::string name = session_file_name(long_id);
  CHECK(name.size() <= 255);
  CHECK(name != session_file_name(std::string(255, '/')));
  CHECK(name.find('/') == std::string::npos);
}

TEST_CASE("a new log starts with the header; appends are one line each; reopen reads them back") {
  TempDir dir;
  JsonlStore store(dir.path);
  {
    SessionHeader h = header_for("s/1");
    h.cwd = "/work";
    auto log = store.open_now(h);
    CHECK(log->take_loaded_events().empty());
    append_one(*log, R"({"type":"turn/start","seq":0})");
    append_one(*log, R"({"type":"turn/end","seq":1})");
  }
  const std::string content = read_all(dir.path / "s%2F1.jsonl");
  CHECK(content.rfind(R"({"type":"session","version":0,"id":"s/1","createdAt":1,"cwd":"/work","delegationDepth":0})" "\n", 0) == 0);
  auto log = store.open_now(header_for("s/1"));
  CHECK(log->header().at("cwd") == "/work");  // the stored header wins over the new one
  auto events = log->take_loaded_events();
  REQUIRE(events.size() == 2);
  CHECK(events[1].at("seq") == 1);
}

TEST_CASE("a torn last line is dropped and truncated away") {
  TempDir dir;
  JsonlStore store(dir.path);
  { append_one(*store.open_now(header_for("t")), R"({"type":"turn/start","seq":0})"); }
  const fs::path file = dir.path / "t.jsonl";
  { std::ofstream(file, std::ios::app) << R"({"type":"assistant/chu)"; }
  const auto torn_size = fs::file_size(file);
  auto log = store.open_now(header_for("t"));
  CHECK(log->take_loaded_events().size() == 1);
  CHECK(fs::file_size(file) < torn_size);
  append_one(*log, R"({"type":"turn/end","seq":1})");
  const std::string content = read_all(file);
  CHECK(content.find("assistant/chu") == std::string::npos);
  CHECK(content.substr(content.size() - 28) == "{\"type\":\"turn/end\",\"seq\":1}\n");
}

TEST_CASE("a complete but unparseable last line is dropped too") {
  TempDir dir;
  JsonlStore store(dir.path);
  { append_one(*store.open_now(header_for("u")), R"({"type":"turn/start","seq":0})"); }
  { std::ofstream(dir.path / "u.jsonl", std::ios::app) << "{not json\n"; }
  CHECK(store.open_now(header_for("u"))->take_loaded_events().size() == 1);
}

TEST_CASE("corruption before the last line refuses to open rather than losing events") {
  TempDir dir;
  JsonlStore store(dir.path);
  { append_one(*store.open_now(header_for("c")), R"({"type":"turn/start","seq":0})"); }
  { std::ofstream(dir.path / "c.jsonl", std::ios::app) << "{bad\n" << R"({"type":"turn/end","seq":2})" << "\n"; }
  try {
    store.open_now(header_for("c"));
    FAIL("a corrupt log was opened");
  } catch (const std::system_error& e) {
    CHECK(e.code() == harnessd::store::errc::corrupt_line);
    CHECK(e.code() == std::errc::illegal_byte_sequence);  // what generic code sees
    CHECK(std::string(e.code().category().name()) == "harnessd.store");
  }
}

TEST_CASE("a file whose header names another id is refused") {
  TempDir dir;
  JsonlStore store(dir.path);
  { std::ofstream(dir.path / "x.jsonl") << R"({"type":"session","version":0,"id":"y","createdAt":1,"delegationDepth":0})" << "\n"; }
  try {
    store.open_now(header_for("x"));
    FAIL("another session's log was opened");
  } catch (const std::system_error& e) {
    CHECK(e.code() == harnessd::store::errc::foreign_log);
    CHECK(std::string(e.what()).ends_with("x.jsonl: the log belongs to another session id"));
  }
}

/// Opens `sessions` logs named PREFIX0, PREFIX1, ..., appends a turn/end to
/// each and starts its end_turn() on `io`; `on_synced` runs as each returns.
template <class OnSynced>
std::vector<std::unique_ptr<SessionLog>> end_turns(JsonlStore& store, boost::asio::io_context& io, int sessions,
                                                   const std::string& prefix, OnSynced on_synced) {
  std::vector<std::unique_ptr<SessionLog>> logs;
  for (int i = 0; i < sessions; ++i) logs.push_back(store.open_now(header_for(prefix + std::to_string(i))));
  for (auto& log : logs) {
    append_one(*log, R"({"type":"turn/end","seq":0})");
    boost::asio::co_spawn(io, log->end_turn(), [on_synced](std::exception_ptr e) {
      CHECK(!e);
      on_synced();
    });
  }
  return logs;
}

TEST_CASE("many sessions' turn ends share sync rounds, and every append is on disk after end_turn") {
  TempDir dir;
  boost::asio::io_context io;  // outlives the store (EventStore::stop)
  JsonlStore store(dir.path);
  constexpr int sessions = 50;
  int synced = 0;
  std::vector<std::unique_ptr<SessionLog>> logs = end_turns(store, io, sessions, "g", [&] { ++synced; });
  CHECK(store.open_logs() == sessions);
  io.run();
  CHECK(synced == sessions);
  logs.clear();
  CHECK(store.open_logs() == 0);
  CHECK(read_all(dir.path / "g7.jsonl").find("turn/end") != std::string::npos);
}

TEST_CASE("a sync round wakes its turns one per pass: other handlers run between them") {
  TempDir dir;
  boost::asio::io_context io;  // outlives the store (EventStore::stop)
  JsonlStore store(dir.path);
  constexpr int sessions = 50;
  int synced = 0;
  int synced_when_other_ran = -1;
  std::vector<std::unique_ptr<SessionLog>> logs = end_turns(store, io, sessions, "w", [&] {
    // Queued by the first woken turn: woken all at once, the other turns
    // of its round would all run before this.
    if (++synced == 1) boost::asio::post(io, [&] { synced_when_other_ran = synced; });
  });
  io.run();
  CHECK(synced == sessions);
  CHECK(synced_when_other_ran >= 1);
  CHECK(synced_when_other_ran <= 3);
}

TEST_CASE("open() runs on the disk pool and resumes on the caller's executor") {
  TempDir dir;
  boost::asio::io_context io;  // outlives the store (EventStore::stop)
  JsonlStore store(dir.path);
  auto future = boost::asio::co_spawn(io, store.open(header_for("p")), boost::asio::use_future);
  io.run();
  auto log = future.get();
  REQUIRE(log);
  CHECK(log->header().at("id") == "p");
}

TEST_CASE("a line nested deeper than the input limit but within the log limit loads back") {
  TempDir dir;
  JsonlStore store(dir.path);
  std::string deep = std::string(40, '[') + std::string(40, ']');
  { append_one(*store.open_now(header_for("d")), R"({"type":"x","seq":0,"data":)" + deep + "}"); }
  CHECK(store.open_now(header_for("d"))->take_loaded_events().size() == 1);
}

TEST_CASE("sync modes parse by name") {
  CHECK(to_string(SyncMode::turn) == "turn");
  CHECK(to_string(SyncMode::batch) == "batch");
  CHECK(to_string(SyncMode::none) == "none");
}

TEST_CASE("session/events pages start from the offset index, not byte 0") {
  TempDir dir;
  constexpr std::int64_t total = 6000;
  {
    JsonlStore store(dir.path);
    auto log = store.open_now(header_for("long"));
    for (std::int64_t seq = 0; seq < total; seq += 250) append_events(*log, seq, seq + 250);
    const auto file_size = fs::file_size(dir.path / "long.jsonl");

    // While the log is open: its appends filled the index.
    CHECK(page_through(store, "long", 100, total) == total);
    const std::uint64_t before = store.page_bytes_read();
    std::optional<EventPage> page = read_page(store, "long", 5000, 10);
    REQUIRE(page);
    REQUIRE(page->events.size() == 10);
    CHECK(page->events.front() == paged_event(5001));
    CHECK(page->last_seq == total - 1);
    CHECK(page->more);
    // One chunk at most from a mark near seq 5000: nothing from byte 0.
    CHECK(store.page_bytes_read() - before < file_size / 2);

    // Appends after the reads keep the index right.
    append_events(*log, total, total + 10);
    page = read_page(store, "long", total - 5, 100);
    REQUIRE(page);
    REQUIRE(page->events.size() == 14);
    CHECK(page->events.front() == paged_event(total - 4));
    CHECK(page->events.back() == paged_event(total + 9));
    CHECK(page->last_seq == total + 9);
    CHECK_FALSE(page->more);
  }
  // A log not open: the first pass through it fills the index.
  JsonlStore store(dir.path);
  CHECK(page_through(store, "long", 1000, total + 10) == total + 10);
  const auto file_size = fs::file_size(dir.path / "long.jsonl");
  const std::uint64_t before = store.page_bytes_read();
  std::optional<EventPage> page = read_page(store, "long", 4321, 5);
  REQUIRE(page);
  CHECK(page->events.front() == paged_event(4322));
  CHECK(page->last_seq == total + 9);
  CHECK(store.page_bytes_read() - before < file_size / 2);
}

TEST_CASE("pages read while another thread appends see every event once, in order") {
  TempDir dir;
  JsonlStore store(dir.path);
  auto log = store.open_now(header_for("busy"));
  constexpr std::int64_t total = 20000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::int64_t seq = 0; seq < total; seq += 40) append_events(*log, seq, seq + 40);
    done.store(true);
  });
  std::int64_t after = -1;
  while (after < total - 1) {
    const bool finished = done.load();
    std::optional<EventPage> page = read_page(store, "busy", after, 300);
    REQUIRE(page);
    CHECK(page->last_seq >= after + static_cast<std::int64_t>(page->events.size()));
    for (const std::string& event : page->events) {
      REQUIRE(event == paged_event(after + 1));
      ++after;
    }
    if (finished && !page->more) break;
  }
  writer.join();
  CHECK(after == total - 1);
}

TEST_CASE("a torn tail cut away on open leaves no stale index behind") {
  TempDir dir;
  JsonlStore store(dir.path);
  { append_events(*store.open_now(header_for("torn")), 0, 200); }
  { std::ofstream(dir.path / "torn.jsonl", std::ios::app) << "{\"type\":\"x\",\"seq\":200,\"pad\":\"" << std::string(500, 'z') << "\n"; }
  std::optional<EventPage> page = read_page(store, "torn", 150, 1000);
  REQUIRE(page);
  CHECK(page->events.size() == 49);
  CHECK(page->last_seq == 199);
  auto log = store.open_now(header_for("torn"));
  CHECK(log->take_loaded_events().size() == 200);
  append_events(*log, 200, 210);
  page = read_page(store, "torn", 195, 1000);
  REQUIRE(page);
  REQUIRE(page->events.size() == 14);
  CHECK(page->events.front() == paged_event(196));
  CHECK(page->events.back() == paged_event(209));
  CHECK(page->last_seq == 209);
  CHECK(page_through(store, "torn", 7, 210) == 210);
}

TEST_CASE("logs are created 0600 and the directories the store makes 0700, whatever the umask") {
  for (const mode_t mask : {mode_t{0}, mode_t{022}, mode_t{0277}}) {
    TempDir dir;
    const mode_t old = ::umask(mask);
    const fs::path root = dir.path / "a" / "b" / "sessions";
    {
      JsonlStore store(root);
      append_one(*store.open_now(header_for("secret")), R"({"type":"turn/start","seq":0})");
    }
    ::umask(old);
    CAPTURE(mask);
    CHECK(mode_of(dir.path / "a") == 0700);
    CHECK(mode_of(dir.path / "a" / "b") == 0700);
    CHECK(mode_of(root) == 0700);
    CHECK(mode_of(root / "secret.jsonl") == 0600);
  }
}
