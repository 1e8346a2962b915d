#include "store/detail/log_reader.hpp"
#include "store/catalog.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

using namespace harnessd::store;
namespace fs = std::filesystem;

namespace {

SessionInfo info(std::string id, std::int64_t updated, std::int64_t last_seq = 0) {
  return SessionInfo{.id = std::move(id), .created_at_ms = 1, .updated_at_ms = updated, .last_seq = last_seq};
}

std::vector<std::string> ids(const ListPage& page) {
  std::vector<std::string> out;
  for (const SessionInfo& s : page.sessions) out.push_back(s.id);
  return out;
}

struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& content) {
    std::random_device rd;
    path = fs::temp_directory_path() / ("harnessd-log-reader-" + std::to_string(rd()) + ".jsonl");
    std::ofstream(path, std::ios::binary) << content;
  }
  ~TempFile() { fs::remove(path); }
};

const std::string header = R"({"type":"session","version":0,"id":"s","createdAt":7,"parentSession":"p","delegationDepth":1})";

std::string event(int seq, int turn, std::int64_t time) {
  return R"({"type":"step/start","seq":)" + std::to_string(seq) + R"(,"time":)" + std::to_string(time) +
         R"(,"data":{"turn":)" + std::to_string(turn) + R"(,"step":0}})";
}

}  // namespace

TEST_CASE("the catalog lists newest updates first and pages by cursor without loss") {
  Catalog catalog;
  catalog.opened(info("b", 20));
  catalog.opened(info("a", 20));
  catalog.opened(info("c", 30));
  Catalog::Handle d = catalog.opened(info("d", 10));
  CHECK(ids(catalog.page(std::nullopt, 10)) == std::vector<std::string>{"c", "a", "b", "d"});

  ListPage first = catalog.page(std::nullopt, 2);
  CHECK(ids(first) == std::vector<std::string>{"c", "a"});
  REQUIRE(first.next_cursor);
  ListPage second = catalog.page(first.next_cursor, 2);
  CHECK(ids(second) == std::vector<std::string>{"b", "d"});
  CHECK_FALSE(second.next_cursor);

  // An append moves a session to the front.
  catalog.advance(d, LogPosition{.last_seq = 5, .turns = 2, .time_ms = 40});
  CHECK(ids(catalog.page(std::nullopt, 1)) == std::vector<std::string>{"d"});
  CHECK(catalog.find("d")->turns == 2);

  CHECK_THROWS_AS(catalog.page(std::string("x"), 1), std::invalid_argument);
  CHECK_THROWS_AS(catalog.page(std::string("12"), 1), std::invalid_argument);
  CHECK_THROWS_AS(catalog.page(std::string("12 "), 1), std::invalid_argument);
  // Ids may hold spaces: the cursor splits at the first one only.
  catalog.opened(info("with space", 50));
  ListPage spaced = catalog.page(std::nullopt, 1);
  CHECK(ids(catalog.page(spaced.next_cursor, 1)) == std::vector<std::string>{"d"});
}

TEST_CASE("a log found on disk never overwrites a later state the catalog knows") {
  Catalog catalog;
  catalog.opened(info("s", 100, 9));
  catalog.found(info("s", 50, 4));
  CHECK(catalog.find("s")->last_seq == 9);
  catalog.found(info("s", 200, 12));
  CHECK(catalog.find("s")->last_seq == 12);
  CHECK(catalog.size() == 1);
}

TEST_CASE("a log's summary comes from its header and last lines, skipping a torn tail") {
  TempFile file(header + "\n" + event(0, 0, 100) + "\n" + event(1, 3, 200) + "\n" +
                R"({"type":"user/message","seq":2,"time":300,"data":{}})" "\n" + R"({"type":"torn)");
  const std::optional<SessionInfo> s = harnessd::store::detail::summarize_log(file.path.string());
  REQUIRE(s);
  CHECK(s->id == "s");
  CHECK(s->created_at_ms == 7);
  CHECK(s->parent == "p");
  CHECK(s->last_seq == 2);
  CHECK(s->updated_at_ms == 300);
  CHECK(s->turns == 4);  // the last event with a turn says turn 3
}

TEST_CASE("a summary finds the last turn behind an event larger than the first tail window") {
  const std::string big = R"({"type":"tool/result","seq":1,"time":9,"data":{"content":")" + std::string(300'000, 'x') + "\"}}";
  TempFile file(header + "\n" + event(0, 5, 1) + "\n" + big + "\n");
  const std::optional<SessionInfo> s = harnessd::store::detail::summarize_log(file.path.string());
  REQUIRE(s);
  CHECK(s->last_seq == 1);
  CHECK(s->updated_at_ms == 9);
  CHECK(s->turns == 6);
}

TEST_CASE("a file without a session header is not summarized") {
  TempFile file("garbage\n");
  CHECK_FALSE(harnessd::store::detail::summarize_log(file.path.string()));
}

TEST_CASE("pages of a log are its lines, bounded by count and bytes, with lastSeq and more") {
  std::string content = header + "\n";
  for (int i = 0; i < 10; ++i) content += event(i, 0, i) + "\n";
  content += R"({"type":"half)";  // being written: not an event yet
  TempFile file(content);
  const std::string path = file.path.string();
  using harnessd::store::detail::read_log_page;

  auto all = read_log_page(path, -1, 1000, 1 << 20);
  REQUIRE(all);
  CHECK(all->events.size() == 10);
  CHECK(all->events[3] == event(3, 0, 3));
  CHECK(all->last_seq == 9);
  CHECK_FALSE(all->more);

  auto middle = read_log_page(path, 2, 3, 1 << 20);
  CHECK(middle->events == std::vector<std::string>{event(3, 0, 3), event(4, 0, 4), event(5, 0, 5)});
  CHECK(middle->more);

  auto by_bytes = read_log_page(path, -1, 1000, 1);
  CHECK(by_bytes->events.size() == 1);  // at least one event, however large
  CHECK(by_bytes->more);

  auto past = read_log_page(path, 9, 10, 1 << 20);
  CHECK(past->events.empty());
  CHECK(past->last_seq == 9);
  CHECK_FALSE(past->more);

  CHECK_FALSE(read_log_page(path + ".missing", -1, 10, 1 << 20));
}

TEST_CASE("a page never copies a corrupt line; a torn last line is left out") {
  {
    TempFile torn(header + "\n" + event(0, 0, 1) + "\n{not json\n");
    auto page = harnessd::store::detail::read_log_page(torn.path.string(), -1, 10, 1 << 20);
    CHECK(page->events.size() == 1);
    CHECK(page->last_seq == 0);
    CHECK_FALSE(page->more);
  }
  TempFile corrupt(header + "\n{not json\n" + event(1, 0, 1) + "\n");
  CHECK_THROWS_AS(harnessd::store::detail::read_log_page(corrupt.path.string(), -1, 10, 1 << 20), std::system_error);
  // Pages before the corruption still read.
  TempFile later(header + "\n" + event(0, 0, 1) + "\n{not json\n" + event(2, 0, 1) + "\n");
  CHECK(harnessd::store::detail::read_log_page(later.path.string(), -1, 1, 1 << 20)->events.size() == 1);
}
