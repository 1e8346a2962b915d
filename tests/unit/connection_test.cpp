// The method table and a Connection driven over an in-memory FrameTransport:
// the gates, the -32602 path and a whole turn, with no socket.
#include "harness/session_registry.hpp"
#include "llm/scripted_provider.hpp"
#include "harnessd/protocol/methods.hpp"
#include "server/metrics.hpp"
#include "store/memory_store.hpp"
#include "util/wakeup.hpp"
#include "server/connection.hpp"
#include "server/methods.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

#include <deque>

using namespace harnessd;
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

/// Frames in from a queue the test fills, frames out into a list: a client
/// that sends everything at once and then finishes (end of input).
class MemoryTransport final : public transport::FrameTransport {
 public:
  MemoryTransport(asio::any_io_executor executor, std::deque<std::string> input,
                  std::shared_ptr<std::vector<json::object>> output,
                  transport::TransportKind kind = transport::TransportKind::stdio)
      : input_(std::move(input)),
        output_(std::move(output)),
        wakeup_(util::Wakeup::create(executor)),
        kind_(kind) {}

  asio::awaitable<transport::ReadResult> read_frame() override {
    if (stopped_ || input_.empty()) co_return transport::ReadResult{};
    current_ = std::move(input_.front());
    input_.pop_front();
    co_return transport::ReadResult{transport::ReadResult::Kind::frame, current_};
  }
  asio::awaitable<void> write_frames(std::span<const std::string_view> blocks) override {
    for (const std::string_view block : blocks) {
      std::size_t start = 0;
      while (start < block.size()) {
        const std::size_t end = block.find('\n', start);
        REQUIRE(end != std::string::npos);
        output_->push_back(json::parse(std::string_view(block).substr(start, end - start)).as_object());
        start = end + 1;
      }
      written_ += block.size();
    }
    co_return;
  }
  void stop_reading() override { stopped_ = true; }
  /// Frames the connection never read.
  std::size_t unread() const { return input_.size(); }
  asio::awaitable<void> close() override { co_return; }
  void force_close() override { stopped_ = true; }
  std::uint64_t bytes_written() const override { return written_; }
  // stdio by default: no handshake timeout, and input EOF lets running
  // turns finish.
  transport::TransportKind kind() const override { return kind_; }
  std::string peer() const override { return "memory"; }

 private:
  std::deque<std::string> input_;
  std::string current_;
  std::shared_ptr<std::vector<json::object>> output_;
  std::shared_ptr<util::Wakeup> wakeup_;
  std::uint64_t written_ = 0;
  bool stopped_ = false;
  transport::TransportKind kind_;
};

struct Daemon {
  asio::io_context io;
  store::MemoryStore store;
  harness::SessionRegistry sessions{io.get_executor(), store, {}};
  llm::ProviderRegistry providers;
  server::Metrics metrics;
  server::ServerContext context{{}, sessions, providers, metrics};

  Daemon() { providers.add(std::make_shared<llm::ScriptedProvider>()); }

  /// Runs one connection that receives `frames`, to its end; returns what
  /// it wrote.
  std::vector<json::object> serve(std::deque<std::string> frames, bool authenticated = true,
                                  transport::TransportKind kind = transport::TransportKind::stdio,
                                  std::size_t* unread = nullptr) {
    auto output = std::make_shared<std::vector<json::object>>();
    auto strand = asio::make_strand(io.get_executor());
    auto transport = std::make_unique<MemoryTransport>(strand, std::move(frames), output, kind);
    MemoryTransport* memory = transport.get();
    auto connection = std::make_shared<server::Connection>(
        strand, std::move(transport), context, authenticated ? &auth::Credentials::anonymous() : nullptr);
    auto done = asio::co_spawn(strand, connection->run(), asio::use_future);
    io.run();
    io.restart();
    done.get();
    if (unread != nullptr) *unread = memory->unread();
    return *output;
  }
};

const json::object* response(const std::vector<json::object>& frames, std::int64_t id) {
  for (const json::object& frame : frames) {
    const json::value* v = frame.if_contains("id");
    if (v != nullptr && v->is_int64() && v->get_int64() == id) return &frame;
  }
  return nullptr;
}

std::int64_t error_code(const std::vector<json::object>& frames, std::int64_t id) {
  const json::object* r = response(frames, id);
  REQUIRE(r != nullptr);
  REQUIRE(r->contains("error"));
  return r->at("error").at("code").as_int64();
}

std::string request(std::int64_t id, std::string_view method, std::string_view params = "{}") {
  return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")" + std::string(method) +
         R"(","params":)" + std::string(params) + "}";
}

}  // namespace

TEST_CASE("the method table has one row per protocol method, found by name") {
  const auto table = server::method_table();
  REQUIRE(table.size() == protocol::method_names.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    CHECK(table[i].name() == protocol::method_names[i]);
    CHECK(server::find_method(protocol::method_names[i]) == &table[i]);
  }
  CHECK(server::find_method("session/unknown") == nullptr);
  CHECK(server::find_method("") == nullptr);
  CHECK(server::find_method("initialize")->authenticates);
  CHECK(server::find_method("session/prompt")->requires_initialize);
  CHECK(server::find_method("shutdown")->answers_last);
}

TEST_CASE("a connection applies the gates, answers -32602 for bad params and runs a turn") {
  Daemon d;
  const auto out = d.serve({
      request(1, "session/prompt", R"({"sessionId":"s","contentBlocks":[{"type":"text","text":"hi"}]})"),
      request(2, "initialize", R"({"maxTokens":"ten"})"),
      request(3, "initialize"),
      request(4, "initialize"),
      request(5, "session/nope"),
      request(6, "session/cancel", R"({"sessionId":5})"),
      request(7, "session/prompt", R"({"sessionId":"s","contentBlocks":[{"type":"text","text":"@chunks 3 4"}]})"),
      request(8, "shutdown"),
      request(9, "session/cancel", R"({"sessionId":"s"})"),
  });
  CHECK(error_code(out, 1) == -32002);
  CHECK(error_code(out, 2) == -32602);
  CHECK(response(out, 2)->at("error").at("message").as_string() == "params.maxTokens must be an integer");

  const json::object* init = response(out, 3);
  REQUIRE(init != nullptr);
  const json::array& methods = init->at("result").at("capabilities").at("methods").as_array();
  REQUIRE(methods.size() == protocol::method_names.size());
  for (std::size_t i = 0; i < methods.size(); ++i) CHECK(methods[i].as_string() == protocol::method_names[i]);
  CHECK(init->at("result").at("capabilities").at("providers") == json::array{"scripted"});

  CHECK(error_code(out, 4) == -32600);  // already initialized
  CHECK(error_code(out, 5) == -32601);
  CHECK(error_code(out, 6) == -32602);

  const json::object* prompt = response(out, 7);
  REQUIRE(prompt != nullptr);
  CHECK(prompt->at("result").at("status").as_string() == "ok");
  std::size_t chunks = 0;
  for (const json::object& frame : out) {
    if (frame.contains("method") && frame.at("params").at("event").at("type").as_string() == "assistant/chunk") {
      ++chunks;
    }
  }
  CHECK(chunks >= 3);

  // A request after shutdown gets -32003; shutdown's answer is the last.
  REQUIRE(response(out, 8) != nullptr);
  CHECK(response(out, 8)->at("result") == json::object{});
  CHECK(error_code(out, 9) == -32003);
  CHECK(&out.back() == response(out, 8));

  const std::string metrics = d.metrics.render_prometheus(d.sessions);
  CHECK(metrics.find(R"(harnessd_requests_total{method="session/prompt",code="-32002"} 1)") != std::string::npos);
  CHECK(metrics.find(R"(harnessd_requests_total{method="other",code="-32601"} 1)") != std::string::npos);
}

TEST_CASE("an unauthenticated connection gets -32004 once and is read no further") {
  Daemon d;
  d.context.config.credentials = auth::Credentials::single_token("secret");
  const auto out = d.serve({request(1, "session/cancel", R"({"sessionId":"s"})"), request(2, "initialize")},
                           /*authenticated=*/false);
  CHECK(error_code(out, 1) == -32004);
  CHECK(response(out, 2) == nullptr);

  const auto ok = d.serve({request(1, "initialize", R"({"authToken":"secret"})"), request(2, "shutdown")}, false);
  REQUIRE(response(ok, 1) != nullptr);
  CHECK(response(ok, 1)->contains("result"));
}

TEST_CASE("a network connection that sends anything but JSON-RPC before initialize is closed") {
  Daemon d;
  std::size_t unread = 0;
  // A browser's cross-site POST: no answer at all, and nothing after it runs.
  const auto http = d.serve({"POST / HTTP/1.1", "Host: 127.0.0.1:7879", request(1, "initialize")}, false,
                            transport::TransportKind::tcp, &unread);
  CHECK(http.empty());
  CHECK(unread == 2);

  // Not JSON: the parse error is answered, then the connection ends.
  const auto garbage = d.serve({"hello", request(1, "initialize")}, false, transport::TransportKind::tcp, &unread);
  REQUIRE(garbage.size() == 1);
  CHECK(garbage[0].at("error").at("code").as_int64() == -32700);
  CHECK(unread == 1);

  // A notification is no request either.
  const auto note = d.serve({R"({"jsonrpc":"2.0","method":"initialize"})", request(1, "initialize")}, false,
                            transport::TransportKind::tcp, &unread);
  CHECK(note.empty());
  CHECK(unread == 1);

  // stdio is the process that started the daemon: it is never cut off.
  const auto stdio = d.serve({"hello", request(1, "initialize")});
  CHECK(response(stdio, 1) != nullptr);
}
