// The turn loop over a real io_context, a real JSONL store and a sink that
// records what a connection would have been sent.
#include "harness/session_registry.hpp"
#include "harnessd/protocol/turn_end.hpp"
#include "llm/scripted_provider.hpp"
#include "store/jsonl_store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

using namespace harnessd;
namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

struct RecordingSink final : harness::EventSink {
  std::vector<std::pair<std::string, json::object>> events;
  std::vector<std::string> notes;
  // Each event is wrapped as {"s":ID,"e":EVENT}: the test sees whose it is.
  Envelope envelope(std::string_view id) override {
    return Envelope{R"({"s":)" + json::serialize(json::string(id)) + R"(,"e":)", "}"};
  }
  asio::awaitable<bool> on_events(std::shared_ptr<const std::string> shared, std::size_t count) override {
    const std::string& block = *shared;
    const std::size_t before = events.size();
    std::size_t start = 0;
    while (start < block.size()) {
      const std::size_t end = block.find('\n', start);
      REQUIRE(end != std::string::npos);
      json::object line = json::parse(std::string_view(block).substr(start, end - start)).as_object();
      events.emplace_back(std::string(line.at("s").as_string()), std::move(line.at("e").as_object()));
      start = end + 1;
    }
    CHECK(events.size() - before == count);
    co_return true;
  }
  asio::awaitable<void> on_subagent_started(protocol::SubagentStarted note) override {
    notes.push_back("started " + note.child_session_id);
    co_return;
  }
  asio::awaitable<void> on_subagent_finished(protocol::SubagentFinished note) override {
    notes.push_back(std::string("finished ") + (note.ok ? "ok" : "error"));
    co_return;
  }
};

// The io_context outlives the store: the store's sync thread may still hold
// objects of that context until the store is destroyed (EventStore::stop).
struct Fixture {
  asio::io_context io;
  fs::path root = fs::temp_directory_path() / ("harnessd-session-test-" + std::to_string(std::random_device{}()));
  store::JsonlStore store{root};
  llm::ScriptedProvider provider;
  ~Fixture() { fs::remove_all(root); }

  harness::PromptInput input(std::string text) {
    harness::PromptInput in;
    in.content = json::array{json::object{{"type", "text"}, {"text", text}}};
    in.provider = &provider;
    in.model = "scripted-1";
    return in;
  }
};

asio::awaitable<harness::PromptOutcome> prompt_on(std::shared_ptr<harness::Session> session,
                                                  harness::PromptInput input, harness::EventSink& sink) {
  REQUIRE(session->try_reserve());
  harness::PromptOutcome outcome =
      co_await asio::co_spawn(session->strand(), session->prompt(std::move(input), sink), asio::use_awaitable);
  co_return outcome;
}

harness::PromptOutcome run_prompt(asio::io_context& io, std::shared_ptr<harness::Session> session,
                                  harness::PromptInput input, harness::EventSink& sink) {
  auto future = asio::co_spawn(io, prompt_on(session, std::move(input), sink), asio::use_future);
  io.restart();
  io.run();
  return future.get();
}

std::vector<std::string> types_of(const RecordingSink& sink) {
  std::vector<std::string> out;
  for (const auto& [id, event] : sink.events) out.emplace_back(event.at("type").as_string());
  return out;
}

}  // namespace

TEST_CASE("a turn emits the protocol's events in order with contiguous seq") {
  Fixture f;
  asio::io_context& io = f.io;
  harness::SessionRegistry registry(io.get_executor(), f.store, {});
  RecordingSink sink;
  auto outcome = run_prompt(io, registry.get_or_create("s"), f.input("@chunks 2 3"), sink);
  CHECK(outcome.reason.kind == protocol::TurnEndReason::Kind::completed);
  CHECK(outcome.final_text == "aaabbb");
  CHECK(types_of(sink) == std::vector<std::string>{"turn/start", "user/message", "request/header", "step/start", "assistant/chunk",
                                                   "assistant/chunk", "assistant/chunk", "assistant/chunk",
                                                   "assistant/chunk", "assistant/message", "step/end", "turn/end"});
  for (std::size_t i = 0; i < sink.events.size(); ++i) CHECK(sink.events[i].second.at("seq") == i);

  RecordingSink second;
  run_prompt(io, registry.get_or_create("s"), f.input("hi"), second);
  CHECK(second.events.front().second.at("seq") == sink.events.size());
  CHECK(second.events.front().second.at("data").at("turn") == 1);
}

TEST_CASE("a busy session refuses a second reservation; cancel settles the turn as aborted") {
  Fixture f;
  asio::io_context& io = f.io;
  harness::SessionRegistry registry(io.get_executor(), f.store, {});
  auto session = registry.get_or_create("busy");
  RecordingSink first;
  auto running = asio::co_spawn(io, prompt_on(session, f.input("@delay 5000\n@chunks 3 1"), first), asio::use_future);
  bool refused = false;
  asio::steady_timer timer(io, std::chrono::milliseconds(50));
  timer.async_wait([&](auto) {
    refused = !session->try_reserve();
    // From another thread, as a closing connection would.
    std::thread([&] { CHECK(session->cancel("cancelled")); }).join();
  });
  io.run();
  CHECK(refused);
  const auto outcome = running.get();
  CHECK(outcome.reason.kind == protocol::TurnEndReason::Kind::aborted);
  CHECK(outcome.reason.reason == "cancelled");
  CHECK(first.events.back().second.at("type") == "turn/end");
  CHECK(!session->reserved());
}

TEST_CASE("admission: a queued prompt runs once a slot frees, one over the queue is refused, a queued cancel aborts at once") {
  Fixture f;
  asio::io_context& io = f.io;
  harness::HarnessOptions options;
  options.max_running_turns = 1;
  options.max_queued_turns = 2;
  harness::SessionRegistry registry(io.get_executor(), f.store, options);
  RecordingSink a, b, c, d;
  auto admitted = [&](std::string text) {
    auto in = f.input(std::move(text));
    in.admit = true;
    return in;
  };
  auto first = asio::co_spawn(io, prompt_on(registry.get_or_create("a"), admitted("@delay 200\nfirst"), a), asio::use_future);
  auto queued = asio::co_spawn(io, prompt_on(registry.get_or_create("b"), admitted("second"), b), asio::use_future);
  auto cancelled = asio::co_spawn(io, prompt_on(registry.get_or_create("c"), admitted("third"), c), asio::use_future);
  auto refused = asio::co_spawn(io, prompt_on(registry.get_or_create("d"), admitted("fourth"), d), asio::use_future);
  std::size_t queued_seen = 0;
  asio::steady_timer timer(io, std::chrono::milliseconds(50));
  timer.async_wait([&](auto) {
    queued_seen = registry.admission().queued();
    CHECK(registry.find("c")->cancel("cancelled"));
  });
  io.run();
  CHECK(queued_seen == 2);
  CHECK(first.get().reason.kind == protocol::TurnEndReason::Kind::completed);
  CHECK(queued.get().final_text == "echo: second");
  const auto aborted = cancelled.get();
  CHECK(aborted.reason.kind == protocol::TurnEndReason::Kind::aborted);
  CHECK(c.events.empty());  // it never started: nothing logged, nothing sent
  const auto over = refused.get();
  CHECK(over.overloaded);
  CHECK(over.retry_after_ms >= 100);
  CHECK(registry.admission().running() == 0);
}

TEST_CASE("idle sessions are evicted, their logs closed, and they load again as after a restart") {
  Fixture f;
  asio::io_context& io = f.io;
  harness::HarnessOptions options;
  options.session_idle = std::chrono::milliseconds(1);
  options.max_open_logs = 4;
  harness::SessionRegistry registry(io.get_executor(), f.store, options);
  for (int i = 0; i < 10; ++i) {
    RecordingSink sink;
    run_prompt(io, registry.get_or_create(std::string("e").append(std::to_string(i))), f.input("hi"), sink);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto held = registry.find("e3");  // in use: never evicted
  CHECK(registry.evict_idle() == 9);
  CHECK(registry.size() == 1);
  CHECK(f.store.open_logs() == 1);
  held.reset();
  RecordingSink again;
  run_prompt(io, registry.get_or_create("e5"), f.input("hi"), again);
  CHECK(again.events.front().second.at("seq") == 11);  // the log continues
  CHECK(again.events.front().second.at("data").at("turn") == 1);
}

TEST_CASE("a log with a seq gap or a turn near INT64_MAX is refused, not trusted") {
  Fixture f;
  {
    std::ofstream out(f.root / "g.jsonl");
    out << R"({"type":"session","version":0,"id":"g","createdAt":1,"delegationDepth":0})" "\n";
    out << R"({"type":"turn/start","seq":0,"time":1,"data":{"turn":9223372036854775807}})" "\n";
  }
  {
    std::ofstream out(f.root / "h.jsonl");
    out << R"({"type":"session","version":0,"id":"h","createdAt":1,"delegationDepth":0})" "\n";
    out << R"({"type":"user/message","seq":9223372036854775807,"time":1,"data":{}})" "\n";
  }
  asio::io_context& io = f.io;
  harness::SessionRegistry registry(io.get_executor(), f.store, {});
  for (const char* id : {"g", "h"}) {
    RecordingSink sink;
    CHECK_THROWS_AS(run_prompt(io, registry.get_or_create(id), f.input("hi"), sink), std::system_error);
    CHECK(sink.events.empty());
    CHECK(!registry.find(id)->reserved());
  }
}

TEST_CASE("a child's id stays within the id limit, even under a 256-byte parent id") {
  Fixture f;
  asio::io_context& io = f.io;
  harness::SessionRegistry registry(io.get_executor(), f.store, {});
  const std::string parent_id = std::string(250, 'p') + "\xc3\xa9\xc3\xa9\xc3\xa9";  // ends in multibyte characters
  auto parent = registry.get_or_create(parent_id);
  auto child = registry.create_child(*parent);
  CHECK(child->id().size() <= harness::max_session_id_bytes);
  CHECK(child->id().find(".sub-") != std::string::npos);
  // Cut at a character boundary: no lone continuation byte before the tail.
  const std::size_t tail = child->id().find(".sub-");
  CHECK((static_cast<unsigned char>(child->id()[tail - 1]) & 0xC0) != 0xC0);
}

TEST_CASE("a log that ends inside a turn is closed with an interrupted turn/end on load") {
  Fixture f;
  {
    harness::SessionRegistry registry(f.io.get_executor(), f.store, {});
    RecordingSink sink;
    run_prompt(f.io, registry.get_or_create("r"), f.input("hello"), sink);
    f.io.restart();
  }
  // Simulate a crash mid-turn: a turn/start and a torn line after the last turn/end.
  {
    std::ofstream out(f.root / "r.jsonl", std::ios::app);
    out << R"({"type":"turn/start","seq":11,"time":1,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}})" "\n";
    out << R"({"type":"user/mess)";
  }
  asio::io_context& io = f.io;
  harness::SessionRegistry registry(io.get_executor(), f.store, {});
  RecordingSink sink;
  auto outcome = run_prompt(io, registry.get_or_create("r"), f.input("again"), sink);
  CHECK(outcome.reason.kind == protocol::TurnEndReason::Kind::completed);
  CHECK(sink.events.front().second.at("seq") == 13);  // 12 is the appended interrupted turn/end
  CHECK(sink.events.front().second.at("data").at("turn") == 2);

  std::ifstream in(f.root / "r.jsonl");
  std::string line;
  std::vector<json::object> lines;
  while (std::getline(in, line)) lines.push_back(json::parse(line).as_object());
  REQUIRE(lines.size() > 13);
  CHECK(lines[13].at("type") == "turn/end");
  CHECK(lines[13].at("data").at("reason").at("kind") == "interrupted");
  CHECK(lines[13].at("seq") == 12);
}

TEST_CASE("the subagent tool runs a child session and reports its answer") {
  Fixture f;
  asio::io_context& io = f.io;
  harness::SessionRegistry registry(io.get_executor(), f.store, {});
  RecordingSink sink;
  auto outcome = run_prompt(io, registry.get_or_create("parent"), f.input("@subagent @reply inner"), sink);
  CHECK(outcome.reason.kind == protocol::TurnEndReason::Kind::completed);
  CHECK(outcome.final_text == "subagent said: inner");
  REQUIRE(sink.notes.size() == 2);
  CHECK(sink.notes[1] == "finished ok");
  const std::string child = sink.notes[0].substr(8);
  std::size_t child_events = 0;
  for (const auto& [id, event] : sink.events) child_events += id == child;
  CHECK(child_events > 0);
  auto child_session = registry.find(child);
  REQUIRE(child_session);
  CHECK(child_session->delegation_depth() == 1);
}

TEST_CASE("the model error directive ends the turn with an error reason") {
  Fixture f;
  asio::io_context& io = f.io;
  harness::SessionRegistry registry(io.get_executor(), f.store, {});
  RecordingSink sink;
  auto outcome = run_prompt(io, registry.get_or_create("e"), f.input("@error boom"), sink);
  CHECK(outcome.reason.kind == protocol::TurnEndReason::Kind::error);
  CHECK(outcome.reason.message == "boom");
  CHECK(protocol::status_for(outcome.reason, false) == protocol::TurnStatus::error);
}

TEST_CASE("a cancel reports true only if the turn will end aborted") {
  llm::CancelScope running;
  CHECK(running.cancel("cancelled"));
  CHECK(running.cancel("again"));  // still aborted: still true
  CHECK_FALSE(running.settle());   // the turn must end aborted
  CHECK(running.reason() == "cancelled");

  llm::CancelScope settled;
  CHECK(settled.settle());
  CHECK_FALSE(settled.cancel("too late"));
  CHECK_FALSE(settled.cancelled());
  CHECK(settled.settle());
}

namespace {

// A store that counts the turns its logs have made durable, over a real
// JSONL store (whose end_turn waits for the group commit's sync).
class SyncCountingStore final : public store::EventStore {
 public:
  explicit SyncCountingStore(store::EventStore& inner) : inner_(inner) {}
  int synced = 0;

  asio::awaitable<std::unique_ptr<store::SessionLog>> open(store::SessionHeader header,
                                                           store::OpenMode mode) override {
    std::unique_ptr<store::SessionLog> log = co_await inner_.open(std::move(header), mode);
    if (!log) co_return nullptr;
    co_return std::make_unique<Log>(std::move(log), synced);
  }
  asio::awaitable<store::ListPage> list(std::optional<std::string> cursor, std::size_t limit) override {
    return inner_.list(std::move(cursor), limit);
  }
  asio::awaitable<std::optional<store::EventPage>> read_events(std::string id, std::int64_t after_seq,
                                                               std::size_t limit, std::size_t max_bytes) override {
    return inner_.read_events(std::move(id), after_seq, limit, max_bytes);
  }
  asio::awaitable<bool> remove(std::string id) override { return inner_.remove(std::move(id)); }
  std::string_view kind() const override { return inner_.kind(); }
  std::size_t open_logs() const override { return inner_.open_logs(); }

 private:
  class Log final : public store::SessionLog {
   public:
    Log(std::unique_ptr<store::SessionLog> inner, int& synced) : inner_(std::move(inner)), synced_(synced) {}
    const json::object& header() const override { return inner_->header(); }
    std::vector<json::object> take_loaded_events() override { return inner_->take_loaded_events(); }
    void append(std::span<const std::string_view> events, const store::LogPosition& at) override {
      inner_->append(events, at);
    }
    asio::awaitable<void> end_turn() override {
      co_await inner_->end_turn();
      ++synced_;
    }

   private:
    std::unique_ptr<store::SessionLog> inner_;
    int& synced_;
  };
  store::EventStore& inner_;
};

// Records, for each push of events, how many turns were durable by then.
struct SyncWatchingSink final : harness::EventSink {
  const int& synced;
  std::vector<int> synced_at_push;
  std::size_t events = 0;
  explicit SyncWatchingSink(const int& s) : synced(s) {}
  Envelope envelope(std::string_view) override { return Envelope{"", ""}; }
  asio::awaitable<void> on_subagent_started(protocol::SubagentStarted) override { co_return; }
  asio::awaitable<void> on_subagent_finished(protocol::SubagentFinished) override { co_return; }
  asio::awaitable<bool> on_events(std::shared_ptr<const std::string>, std::size_t count) override {
    synced_at_push.push_back(synced);
    events += count;
    co_return true;
  }
};

}  // namespace

TEST_CASE("a busy session's last batch leaves after the turn's sync, with the answer; a first prompt's at once") {
  Fixture f;
  asio::io_context& io = f.io;
  SyncCountingStore store(f.store);
  harness::SessionRegistry registry(io.get_executor(), store, {});
  auto session = registry.get_or_create("busy");

  // A session's first prompt (as any after a pause): its events are seen
  // before the log's sync, as soon as they are made.
  // Clients' prompts (admitted), as over the wire.
  harness::PromptInput input = f.input("@chunks 2 3");
  input.admit = true;
  SyncWatchingSink first(store.synced);
  run_prompt(io, session, input, first);
  CHECK(first.synced_at_push == std::vector<int>{0});
  CHECK(store.synced == 1);

  // The next prompt right after it settled: the turn's one batch waits for
  // the sync, and the answer follows it at once.
  SyncWatchingSink second(store.synced);
  run_prompt(io, session, input, second);
  CHECK(second.synced_at_push == std::vector<int>{2});
  CHECK(second.events == first.events - 1);  // the same request/header is not logged again

  // A busy session's batches hold 256 events: a turn of 100 chunks is one
  // batch, held for the sync like the last above.
  harness::PromptInput longer = f.input("@chunks 100 3");
  longer.admit = true;
  SyncWatchingSink third(store.synced);
  run_prompt(io, session, longer, third);
  CHECK(third.synced_at_push == std::vector<int>{3});
  CHECK(third.events > 64);  // more than one batch of a prompt after a pause
}
