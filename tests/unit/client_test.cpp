// The C++ client against a scripted fake server (frames the real daemon never
// sends: server requests, unknown ids, garbage, storms, drops) and against the
// real harnessd over stdio, TCP and WebSocket.
#include "harnessd/client/blocking_client.hpp"
#include "harnessd/client/client.hpp"
#include "harnessd/client/harness.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace harnessd::client;
namespace protocol = harnessd::protocol;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------
// Running a test coroutine on a bounded io_context

/// Runs `test` on `io` for at most `limit`; rethrows what it threw and fails
/// when it did not finish.
void run_bounded(asio::io_context& io, asio::awaitable<void> test, std::chrono::seconds limit = 30s) {
  bool finished = false;
  std::exception_ptr failure;
  asio::co_spawn(io, std::move(test), [&](std::exception_ptr e) {
    finished = true;
    failure = e;
    io.stop();  // the client's reader would keep the context busy
  });
  io.restart();
  io.run_for(limit);
  REQUIRE_MESSAGE(finished, "test coroutine did not finish in time");
  if (failure) std::rethrow_exception(failure);
}

// ---------------------------------------------------------------------------
// A fake server: accepts one connection and answers each request with the
// lines its script returns ("$ID" becomes the request's id; "<close>" drops
// the connection).

using Script = std::function<std::vector<std::string>(const json::object& request)>;

struct FakeServer {
  explicit FakeServer(asio::io_context& io) : acceptor(io, {asio::ip::make_address("127.0.0.1"), 0}) {}
  std::uint16_t port() const { return acceptor.local_endpoint().port(); }

  asio::ip::tcp::acceptor acceptor;
  Script script;
  std::vector<json::object> received;
};

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

asio::awaitable<void> serve(FakeServer& server) {
  asio::ip::tcp::socket socket = co_await server.acceptor.async_accept(asio::use_awaitable);
  std::string buffer;
  for (;;) {
    boost::system::error_code ec;
    const std::size_t n = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), '\n',
                                                          asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    json::object request = json::parse(std::string_view(buffer).substr(0, n - 1)).as_object();
    buffer.erase(0, n);
    server.received.push_back(request);
    const std::string id = json::serialize(request.at("id"));
    std::string out;
    bool close = false;
    for (const std::string& line : server.script(request)) {
      if (line == "<close>") {
        close = true;
        break;
      }
      out += replace_all(line, "$ID", id);
      out += '\n';
    }
    if (!out.empty()) co_await asio::async_write(socket, asio::buffer(out), asio::use_awaitable);
    if (close) {
      socket.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
      socket.close(ec);
      co_return;
    }
  }
}

Client connect_fake(asio::io_context& io, FakeServer& server) {
  asio::co_spawn(io, serve(server), asio::detached);
  std::unique_ptr<ClientTransport> transport;
  asio::co_spawn(io, connect_tcp(io.get_executor(), "127.0.0.1", server.port()),
                 [&](std::exception_ptr e, std::unique_ptr<ClientTransport> t) {
                   REQUIRE_FALSE(e);
                   transport = std::move(t);
                 });
  while (!transport) io.run_one_for(5s);
  return Client(io.get_executor(), std::move(transport));
}

std::string result_line(std::string_view result_json) {
  return std::string(R"({"jsonrpc":"2.0","id":$ID,"result":)") + std::string(result_json) + "}";
}

std::string event_line(std::string_view session, std::int64_t seq, std::string_view type, std::string_view data) {
  return std::string(R"({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":")") + std::string(session) +
         R"(","event":{"type":")" + std::string(type) + R"(","seq":)" + std::to_string(seq) +
         R"(,"time":1,"data":)" + std::string(data) + "}}}";
}

// Coroutines are named functions with by-value (or reference-to-test-state)
// parameters: the code base avoids lambda coroutines (GCC 12).

asio::awaitable<void> expect_result(Client& client, std::string method, json::value expected) {
  json::value params = json::object{};
  json::value result = co_await client.request(std::move(method), std::move(params));
  CHECK(result == expected);
}

asio::awaitable<void> expect_closed(Client& client, std::string method, std::string fragment) {
  json::value params = json::object{};
  std::string what;
  try {
    co_await client.request(std::move(method), std::move(params));
  } catch (const TransportClosed& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(what.find(fragment) != std::string::npos);
}

asio::awaitable<void> expect_protocol_error(Client& client, std::string session) {
  bool thrown = false;
  std::string text = "hi";
  try {
    co_await client.session_prompt(std::move(session), std::move(text));
  } catch (const ProtocolError&) {
    thrown = true;
  }
  CHECK(thrown);
}

}  // namespace

TEST_CASE("client: a server request frame (id and method) never resolves a waiting request") {
  asio::io_context io;
  FakeServer server(io);
  server.script = [](const json::object&) {
    return std::vector<std::string>{
        R"({"jsonrpc":"2.0","id":$ID,"method":"session/prompt","params":{"sessionId":"x"}})",
        R"({"jsonrpc":"2.0","id":$ID,"method":"evil"})",
        result_line(R"({"pong":true})"),
    };
  };
  Client client = connect_fake(io, server);
  run_bounded(io, expect_result(client, "ping", json::parse(R"({"pong":true})")));
  CHECK(client.stats().server_requests == 2);
  CHECK(client.stats().responses == 1);
  CHECK(server.received.size() == 1);  // nothing was sent back in answer
}

TEST_CASE("client: responses with unknown ids are ignored") {
  asio::io_context io;
  FakeServer server(io);
  server.script = [](const json::object&) {
    return std::vector<std::string>{
        R"({"jsonrpc":"2.0","id":999,"result":"not yours"})",
        R"({"jsonrpc":"2.0","id":"1","result":"a string id is never ours"})",
        R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}})",
        result_line("42"),
    };
  };
  Client client = connect_fake(io, server);
  run_bounded(io, expect_result(client, "ping", json::value(42)));
  CHECK(client.stats().unknown_ids == 3);
}

TEST_CASE("client: malformed frames are ignored") {
  asio::io_context io;
  FakeServer server(io);
  server.script = [](const json::object&) {
    return std::vector<std::string>{
        "not json at all", "[1,2,3]", "42", R"({"jsonrpc":"2.0"})", R"({"jsonrpc":"2.0","method":7})",
        R"({"jsonrpc":"2.0","method":"session.event","params":[1]})", "{\"truncated\":", result_line(R"("fine")"),
    };
  };
  Client client = connect_fake(io, server);
  run_bounded(io, expect_result(client, "ping", json::value("fine")));
  CHECK(client.stats().malformed == 7);
  CHECK(client.stats().responses == 1);
}

namespace {

struct StormState {
  std::vector<std::int64_t> seqs;
  std::size_t other_sessions = 0;
  TurnResult result;
};

asio::awaitable<void> storm_turn(Client& client, StormState& state) {
  Harness harness(client);
  NotificationHandler live = [&state](const Notification& n) {
    state.seqs.push_back(n.params.at("event").at("seq").as_int64());
  };
  std::string session = "S";
  std::string input = "storm";
  state.result = co_await harness.run(std::move(session), std::move(input), std::move(live));
}

}  // namespace

TEST_CASE("client: a notification storm while a response is pending arrives in order, then the response") {
  constexpr int storm = 10'000;
  asio::io_context io;
  FakeServer server(io);
  server.script = [](const json::object&) {
    std::vector<std::string> lines;
    for (int i = 0; i < storm; ++i) {
      lines.push_back(event_line("S", i, "assistant/chunk",
                                 R"({"turn":0,"step":0,"chunk":{"type":"text-delta","index":0,"text":"x"}})"));
      if (i % 100 == 0) lines.push_back(event_line("other", i, "step/start", R"({"turn":0,"step":0})"));
    }
    lines.push_back(event_line("S", storm, "assistant/message",
                               R"({"turn":0,"step":0,"content":[{"type":"text","text":"done"}],)"
                               R"("provenance":{"provider":"fake","model":"m"}})"));
    lines.push_back(result_line(R"({"status":"ok","reason":{"kind":"completed"}})"));
    return lines;
  };
  Client client = connect_fake(io, server);
  StormState state;
  run_bounded(io, storm_turn(client, state));
  REQUIRE(state.seqs.size() == storm + 1);
  for (int i = 0; i <= storm; ++i) REQUIRE(state.seqs[i] == i);
  CHECK(state.result.status == "ok");
  CHECK(state.result.events.size() == storm + 1);
  CHECK(state.result.notifications.size() == storm + 1);
  CHECK(state.result.final_response == "done");
  CHECK(client.stats().notifications == storm + storm / 100 + 1);
}

TEST_CASE("client: a dropped connection fails the pending request with TransportClosed") {
  asio::io_context io;
  FakeServer server(io);
  server.script = [](const json::object&) {
    return std::vector<std::string>{event_line("S", 0, "turn/start", "{}"), "<close>"};
  };
  Client client = connect_fake(io, server);
  run_bounded(io, expect_closed(client, "session/prompt", "closed by the daemon"));
  CHECK(client.closed());
  // Later calls fail at once, with the same reason.
  run_bounded(io, expect_closed(client, "session/cancel", "closed by the daemon"));
}

TEST_CASE("client: on_close handlers run once when the daemon drops the connection, and at once afterwards") {
  asio::io_context io;
  FakeServer server(io);
  server.script = [](const json::object&) {
    return std::vector<std::string>{event_line("S", 0, "turn/start", "{}"), "<close>"};
  };
  Client client = connect_fake(io, server);
  int calls = 0;
  client.on_close([&calls] { ++calls; });
  CHECK(calls == 0);
  run_bounded(io, expect_closed(client, "session/prompt", "closed by the daemon"));
  io.restart();
  io.poll();
  CHECK(calls == 1);
  bool late = false;
  client.on_close([&late] { late = true; });
  CHECK_FALSE(late);  // posted, never run inside the call
  io.restart();
  io.poll();
  CHECK(late);
  CHECK(calls == 1);
}

namespace {

asio::awaitable<void> close_soon(Client& client) {
  asio::steady_timer timer(co_await asio::this_coro::executor, 50ms);
  co_await timer.async_wait(asio::use_awaitable);
  co_await client.close();
}

asio::awaitable<void> request_then_close(Client& client) {
  asio::co_spawn(co_await asio::this_coro::executor, close_soon(client), asio::detached);
  std::string method = "session/prompt";
  std::string fragment = "closed by the client";
  co_await expect_closed(client, std::move(method), std::move(fragment));
}

}  // namespace

TEST_CASE("client: close() fails pending requests with TransportClosed") {
  asio::io_context io;
  FakeServer server(io);
  server.script = [](const json::object&) { return std::vector<std::string>{}; };  // never answers
  Client client = connect_fake(io, server);
  run_bounded(io, request_then_close(client));
}

TEST_CASE("client: a malformed session/prompt result throws ProtocolError") {
  const char* bad_results[] = {
      R"({"status":"weird","reason":{"kind":"completed"}})",
      R"({"status":"ok","reason":"completed"})",
      R"({"status":"ok"})",
      R"({"status":"ok","reason":{"kind":7}})",
      R"("ok")",
  };
  for (const char* bad : bad_results) {
    CAPTURE(bad);
    asio::io_context io;
    FakeServer server(io);
    server.script = [bad](const json::object&) { return std::vector<std::string>{result_line(bad)}; };
    Client client = connect_fake(io, server);
    run_bounded(io, expect_protocol_error(client, "S"));
  }
  // A response with both result and error is a protocol error too.
  asio::io_context io;
  FakeServer server(io);
  server.script = [](const json::object&) {
    return std::vector<std::string>{R"({"jsonrpc":"2.0","id":$ID,"result":{},"error":{"code":1,"message":"x"}})"};
  };
  Client client = connect_fake(io, server);
  run_bounded(io, expect_protocol_error(client, "S"));
}

TEST_CASE("client: error responses become RpcError with code, message and data") {
  asio::io_context io;
  FakeServer server(io);
  server.script = [](const json::object&) {
    return std::vector<std::string>{
        R"({"jsonrpc":"2.0","id":$ID,"error":{"code":-32001,"message":"session already has an active prompt: S","data":{"sessionId":"S"}}})"};
  };
  Client client = connect_fake(io, server);
  int code = 0;
  json::value data;
  struct Probe {
    static asio::awaitable<void> run(Client& client, int& code, json::value& data) {
      std::string session = "S";
      std::string text = "hi";
      try {
        co_await client.session_prompt(std::move(session), std::move(text));
      } catch (const RpcError& e) {
        code = e.code();
        data = e.data();
      }
    }
  };
  run_bounded(io, Probe::run(client, code, data));
  CHECK(code == -32001);
  CHECK(data == json::parse(R"({"sessionId":"S"})"));
}

// ---------------------------------------------------------------------------
// session/list, session/events, session/subscribe, session/unsubscribe

namespace {

struct ReaderState {
  protocol::InitializeResult init;
  protocol::ListResult first;
  protocol::ListResult second;
  protocol::EventsResult events;
  protocol::EventsResult defaults;
  std::int64_t subscribed_last_seq = -2;
  std::vector<std::string> delivered;  // "SESSION:SEQ" of what the subscription handler saw
  std::size_t delivered_before_response = 0;
  std::size_t delivered_after_reset = 0;
  bool unsubscribed = false;
};

asio::awaitable<void> reader_calls(Client& client, ReaderState& state) {
  protocol::InitializeParams init;
  init.on_disconnect = protocol::OnDisconnect::continue_running;
  state.init = co_await client.initialize(std::move(init));

  protocol::ListParams first;
  first.limit = 2;
  state.first = co_await client.session_list(std::move(first));
  protocol::ListParams second;
  second.cursor = state.first.next_cursor;
  state.second = co_await client.session_list(std::move(second));

  std::string session = "S";
  state.events = co_await client.session_events(std::move(session), 3, 2);
  session = "S";
  state.defaults = co_await client.session_events(std::move(session));

  NotificationHandler on_event = [&state](const Notification& n) {
    state.delivered.push_back(std::string(n.params.at("sessionId").as_string()) + ":" +
                              std::to_string(n.params.at("event").at("seq").as_int64()));
  };
  session = "S";
  std::optional<std::int64_t> after = 7;
  SessionSubscription sub = co_await client.session_subscribe(std::move(session), after, std::move(on_event));
  state.subscribed_last_seq = sub.last_seq;
  state.delivered_before_response = state.delivered.size();
  // The next answer carries a live event of S first.
  std::string ping = "ping";
  json::value nothing;
  co_await client.request(std::move(ping), std::move(nothing));
  sub.events.reset();
  const std::size_t before_reset = state.delivered.size();
  ping = "ping";
  co_await client.request(std::move(ping), std::move(nothing));
  state.delivered_after_reset = state.delivered.size() - before_reset;
  session = "S";
  state.unsubscribed = co_await client.session_unsubscribe(std::move(session));
}

}  // namespace

TEST_CASE("client: session/list, session/events, session/subscribe and session/unsubscribe against a fake server") {
  asio::io_context io;
  FakeServer server(io);
  int pings = 0;
  server.script = [&pings](const json::object& request) -> std::vector<std::string> {
    const std::string method(request.at("method").as_string());
    if (method == "initialize") {
      return {result_line(
          R"({"serverInfo":{"name":"deepseek-harness-sdk-runtime","version":"0.1.0"},"protocolVersion":1,)"
          R"("capabilities":{"providers":["scripted"],"methods":["initialize","session/list","session/subscribe"]}})")};
    }
    if (method == "session/list") {
      if (!request.at("params").as_object().contains("cursor")) {
        return {result_line(
            R"({"sessions":[{"sessionId":"S.sub-1-ab","createdAt":10,"updatedAt":12,"lastSeq":9,"turns":1,)"
            R"("running":false,"parentSessionId":"S"},{"sessionId":"S","createdAt":5,"updatedAt":12,"lastSeq":21,)"
            R"("turns":2,"running":true}],"nextCursor":"12 S"})")};
      }
      return {result_line(
          R"({"sessions":[{"sessionId":"old","createdAt":1,"updatedAt":1,"lastSeq":-1,"turns":0,"running":false}]})")};
    }
    if (method == "session/events") {
      return {result_line(
          R"({"events":[{"type":"step/start","seq":4,"time":1,"data":{"turn":0,"step":0}},)"
          R"({"type":"step/end","seq":5,"time":1,"data":{"turn":0,"step":0}}],"lastSeq":21,"more":true})")};
    }
    if (method == "session/subscribe") {
      return {
          event_line("S", 8, "step/end", R"({"turn":0,"step":0})"),
          event_line("other", 3, "step/end", R"({"turn":0,"step":0})"),  // not this subscription's
          R"({"jsonrpc":"2.0","method":"subagent.started","params":{"parentSessionId":"S","childSessionId":"S.c"}})",
          event_line("S.c", 0, "turn/start", "{}"),  // a child's events are not the subscription's either
          event_line("S", 9, "turn/end", R"({"turn":0,"reason":{"kind":"completed"}})"),
          result_line(R"({"lastSeq":9})"),
      };
    }
    if (method == "ping") {
      ++pings;
      return {event_line("S", 9 + pings, "turn/start", R"({"turn":1})"), result_line("{}")};
    }
    if (method == "session/unsubscribe") return {result_line(R"({"unsubscribed":true})")};
    return {R"({"jsonrpc":"2.0","id":$ID,"error":{"code":-32601,"message":"method not found"}})"};
  };
  Client client = connect_fake(io, server);
  ReaderState state;
  run_bounded(io, reader_calls(client, state));

  // initialize: onDisconnect and the advertised methods.
  REQUIRE(server.received.size() == 9);
  CHECK(server.received[0].at("params").at("onDisconnect") == "continue");
  CHECK(state.init.supports("session/subscribe"));
  CHECK_FALSE(state.init.supports("session/events"));

  // session/list: typed entries, the cursor passed back.
  CHECK(server.received[1].at("params") == json::parse(R"({"limit":2})"));
  REQUIRE(state.first.sessions.size() == 2);
  const protocol::SessionSummary& child = state.first.sessions[0];
  CHECK(child.session_id == "S.sub-1-ab");
  CHECK(child.created_at == 10);
  CHECK(child.updated_at == 12);
  CHECK(child.last_seq == 9);
  CHECK(child.turns == 1);
  CHECK_FALSE(child.running);
  CHECK(child.parent_session_id == std::optional<std::string>("S"));
  CHECK(state.first.sessions[1].running);
  CHECK_FALSE(state.first.sessions[1].parent_session_id);
  CHECK(state.first.next_cursor == std::optional<std::string>("12 S"));
  CHECK(server.received[2].at("params") == json::parse(R"({"cursor":"12 S"})"));
  REQUIRE(state.second.sessions.size() == 1);
  CHECK(state.second.sessions[0].last_seq == -1);
  CHECK_FALSE(state.second.next_cursor);

  // session/events: params as given (limit 0 leaves the daemon's default).
  CHECK(server.received[3].at("params") == json::parse(R"({"sessionId":"S","afterSeq":3,"limit":2})"));
  CHECK(server.received[4].at("params") == json::parse(R"({"sessionId":"S"})"));
  REQUIRE(state.events.events.size() == 2);
  CHECK(json::parse(state.events.events[0]).at("type") == "step/start");
  CHECK(json::parse(state.events.events[1]).at("seq") == 5);
  CHECK(state.events.last_seq == 21);
  CHECK(state.events.more);

  // session/subscribe: only this session's events, the replay before the response.
  CHECK(server.received[5].at("params") == json::parse(R"({"sessionId":"S","afterSeq":7})"));
  CHECK(state.subscribed_last_seq == 9);
  CHECK(state.delivered_before_response == 2);
  REQUIRE(state.delivered.size() == 3);
  CHECK(state.delivered[0] == "S:8");
  CHECK(state.delivered[1] == "S:9");
  CHECK(state.delivered[2] == "S:10");      // live, after the response
  CHECK(state.delivered_after_reset == 0);  // reset() stops the local delivery
  CHECK(server.received[8].at("params") == json::parse(R"({"sessionId":"S"})"));
  CHECK(state.unsubscribed);
}

namespace {

asio::awaitable<void> subscribe_unknown(Client& client, int& code, std::size_t& delivered) {
  NotificationHandler on_event = [&delivered](const Notification&) { ++delivered; };
  std::string session = "nope";
  std::optional<std::int64_t> after;  // absent: not sent
  try {
    co_await client.session_subscribe(std::move(session), after, std::move(on_event));
  } catch (const RpcError& e) {
    code = e.code();
  }
  // A stray event of that session after the refusal reaches nobody.
  std::string ping = "ping";
  json::value nothing;
  co_await client.request(std::move(ping), std::move(nothing));
}

}  // namespace

TEST_CASE("client: a refused session/subscribe throws RpcError and removes its handler") {
  asio::io_context io;
  FakeServer server(io);
  server.script = [](const json::object& request) -> std::vector<std::string> {
    if (request.at("method") == "session/subscribe") {
      return {R"({"jsonrpc":"2.0","id":$ID,"error":{"code":-32602,"message":"unknown session: nope","data":{"sessionId":"nope"}}})"};
    }
    return {event_line("nope", 0, "turn/start", "{}"), result_line("{}")};
  };
  Client client = connect_fake(io, server);
  int code = 0;
  std::size_t delivered = 0;
  run_bounded(io, subscribe_unknown(client, code, delivered));
  CHECK(code == -32602);
  CHECK(delivered == 0);
  CHECK(server.received[0].at("params") == json::parse(R"({"sessionId":"nope"})"));
}

namespace {

asio::awaitable<void> expect_reader_protocol_error(Client& client, std::string method, bool& thrown) {
  try {
    if (method == "session/list") {
      protocol::ListParams options;
      co_await client.session_list(std::move(options));
    } else if (method == "session/events") {
      std::string session = "S";
      co_await client.session_events(std::move(session));
    } else if (method == "tools/list") {
      co_await client.tools_list();
    } else if (method == "session/subscribe") {
      std::string session = "S";
      std::optional<std::int64_t> after = -1;
      NotificationHandler none;
      co_await client.session_subscribe(std::move(session), after, std::move(none));
    } else {
      std::string session = "S";
      co_await client.session_unsubscribe(std::move(session));
    }
  } catch (const ProtocolError&) {
    thrown = true;
  }
}

}  // namespace

TEST_CASE("client: malformed results of the session reader methods throw ProtocolError") {
  const std::pair<const char*, const char*> cases[] = {
      {"session/list", R"({"sessions":{}})"},
      {"session/list", R"({"sessions":[{"sessionId":"S"}]})"},
      {"session/list", R"({"sessions":[{"sessionId":"S","createdAt":1,"updatedAt":1,"lastSeq":0,"turns":1,"running":"no"}]})"},
      {"session/list", R"({"sessions":[],"nextCursor":5})"},
      {"session/events", R"({"events":[],"more":false})"},
      {"session/events", R"({"events":[7],"lastSeq":1,"more":false})"},
      {"session/events", R"({"events":[{"type":"x","seq":"1"}],"lastSeq":1,"more":false})"},
      {"session/events", R"({"events":[],"lastSeq":1.5,"more":false})"},
      {"session/subscribe", R"({})"},
      {"session/subscribe", R"([9])"},
      {"session/unsubscribe", R"({"unsubscribed":1})"},
      {"tools/list", R"({"tools":{}})"},
      {"tools/list", R"({"tools":[{"name":"read"}]})"},
      {"tools/list", R"({"tools":[{"name":"read","inputSchema":{},"readOnly":"yes"}]})"},
  };
  for (const auto& [method, bad] : cases) {
    CAPTURE(method);
    CAPTURE(bad);
    asio::io_context io;
    FakeServer server(io);
    server.script = [bad = bad](const json::object&) { return std::vector<std::string>{result_line(bad)}; };
    Client client = connect_fake(io, server);
    bool thrown = false;
    run_bounded(io, expect_reader_protocol_error(client, method, thrown));
    CHECK(thrown);
  }
}

TEST_CASE("client: parse_server_url") {
  harnessd::util::Url tcp = parse_server_url("tcp://127.0.0.1:7879");
  CHECK(tcp.scheme == "tcp");
  CHECK(tcp.host == "127.0.0.1");
  CHECK(tcp.port == 7879);
  CHECK(parse_server_url("tcp://127.0.0.1:7879/").port == 7879);
  harnessd::util::Url ws = parse_server_url("ws://[::1]:7878/?access_token=abc");
  CHECK(ws.host == "::1");
  CHECK(ws.target() == "/?access_token=abc");
  CHECK(ws.host_port() == "[::1]:7878");
  CHECK(parse_server_url("ws://h:1?x=1").target() == "/?x=1");
  CHECK(parse_server_url("ws://h:1").target() == "/");
  CHECK(parse_server_url("ws://h:1/rpc").target() == "/rpc");
  CHECK(parse_server_url("tcp://[::1]:4000").host == "::1");
  CHECK(parse_server_url("tcp://localhost:1").host == "localhost");  // the resolver's to map
  auto refusal = [](std::string_view url) {
    try {
      parse_server_url(url);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refusal("127.0.0.1:80") ==
        "\"127.0.0.1:80\" is not a URL: use tcp://HOST:PORT or ws://HOST:PORT or tls://HOST:PORT or wss://HOST:PORT");
  CHECK(refusal("http://h:1") == "\"http://h:1\": scheme must be tcp or ws or tls or wss");
  CHECK(refusal("tcp://h") == "\"tcp://h\": missing :PORT");
  CHECK(refusal("tcp://:1") == "\"tcp://:1\": missing host");
  CHECK(refusal("tcp://h:99999") == "\"tcp://h:99999\": port must be 1..65535");
  CHECK(refusal("tcp://h:0") == "\"tcp://h:0\": port must be 1..65535");
  CHECK(refusal("tcp://h:x") == "\"tcp://h:x\": port must be 1..65535");
  CHECK(refusal("tcp://h:1/x") == "\"tcp://h:1/x\": a tcp:// URL has no path");
  CHECK(refusal("tcp://h:1?x") == "\"tcp://h:1?x\": a tcp:// URL has no path");
  CHECK(refusal("ws://[::1]80") == "\"ws://[::1]80\": bad IPv6 form, use [ADDR]:PORT");
  // TLS forms: tls:// like tcp://, wss:// like ws://.
  harnessd::util::Url tls = parse_server_url("TLS://example.org:7879");
  CHECK(tls.scheme == "tls");
  CHECK(tls.host == "example.org");
  CHECK(tls.port == 7879);
  harnessd::util::Url wss = parse_server_url("wss://[::1]:7878/rpc?access_token=abc");
  CHECK(wss.scheme == "wss");
  CHECK(wss.host == "::1");
  CHECK(wss.target() == "/rpc?access_token=abc");
  CHECK(refusal("tls://h:1/x") == "\"tls://h:1/x\": a tls:// URL has no path");
  CHECK(refusal("tls://h") == "\"tls://h\": missing :PORT");
  CHECK(refusal("wss://h") == "\"wss://h\": missing :PORT");
}

TEST_CASE("client: TLS options are checked before connecting") {
  // Port 1 is never reached: the CA file is read first.
  ConnectOptions options;
  options.ca_file = "/nonexistent/ca.pem";
  for (const char* url : {"tls://127.0.0.1:1", "wss://127.0.0.1:1"}) {
    try {
      BlockingClient::connect(url, options);
      FAIL("connected");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("cannot read CA file /nonexistent/ca.pem") != std::string::npos);
    }
  }
  const auto empty = std::filesystem::temp_directory_path() / ("harness-empty-ca-" + std::to_string(::getpid()));
  std::ofstream(empty) << "no certificate here\n";
  options.ca_file = empty.string();
  try {
    BlockingClient::connect("tls://127.0.0.1:1", options);
    FAIL("connected");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("holds no usable PEM certificate") != std::string::npos);
  }
  std::filesystem::remove(empty);
  CHECK(make_error_code(errc::certificate_untrusted).message() == "the daemon's TLS certificate was not trusted");
}

// ---------------------------------------------------------------------------
// Against the real daemon

namespace {

std::string harnessd_path() {
  if (const char* env = std::getenv("HARNESSD_BIN"); env != nullptr && *env != '\0') return env;
#ifdef HARNESSD_TEST_BIN
  return HARNESSD_TEST_BIN;
#else
  return "harnessd";
#endif
}

/// A harnessd listening on a network URL; SIGTERM and reaped at scope exit.
class NetworkDaemon {
 public:
  explicit NetworkDaemon(std::string scheme, std::vector<std::string> store = {"--store", "memory"}) {
    const std::string ready = (std::filesystem::temp_directory_path() /
                               ("harness-client-test-" + std::to_string(::getpid()) + "-" + scheme + ".json"))
                                  .string();
    std::filesystem::remove(ready);
    std::vector<std::string> args{harnessd_path(), "--listen", scheme + "://127.0.0.1:0", "--ready-file", ready,
                                  "--threads", "2", "--log-level", "warn"};
    args.insert(args.end(), store.begin(), store.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    REQUIRE(::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) == 0);
    for (int i = 0; i < 1000 && url_.empty(); ++i) {
      std::ifstream in(ready);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!text.empty()) url_ = std::string(json::parse(text).at("listen").at(0).as_string());
      if (url_.empty()) std::this_thread::sleep_for(10ms);
    }
    std::filesystem::remove(ready);
    REQUIRE_MESSAGE(!url_.empty(), "harnessd did not become ready");
  }
  ~NetworkDaemon() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  const std::string& url() const { return url_; }

 private:
  pid_t pid_ = -1;
  std::string url_;
};

struct RealTurn {
  protocol::InitializeResult init;
  TurnResult result;
  TurnResult second;
  TurnResult subagent;
};

asio::awaitable<void> hello_turns(Client& client, RealTurn& out, bool shutdown) {
  protocol::InitializeParams init;
  out.init = co_await client.initialize(std::move(init));
  Harness harness(client);
  std::string session = "real";
  std::string first = "hello";
  std::string second = "@chunks 3 4";
  std::string session_again = session;
  out.result = co_await harness.run(std::move(session), std::move(first));
  out.second = co_await harness.run(std::move(session_again), std::move(second));
  std::string parent = "parent";
  std::string delegate = "@subagent hi";
  out.subagent = co_await harness.run(std::move(parent), std::move(delegate));
  if (shutdown) co_await client.shutdown();
  co_await client.close();
}

void check_hello(const RealTurn& turn) {
  CHECK(turn.init.server_name == "deepseek-harness-sdk-runtime");
  CHECK(turn.init.protocol_version == 1);
  const TurnResult& r = turn.result;
  CHECK(r.status == "ok");
  CHECK(r.reason.at("kind") == "completed");
  CHECK(r.final_response == "echo: hello");
  REQUIRE(r.events.size() >= 4);
  CHECK(r.events.front().at("type") == "turn/start");
  CHECK(r.events.back().at("type") == "turn/end");  // every notification precedes the response
  CHECK(r.notifications.size() == r.events.size());
  for (std::size_t i = 0; i < r.events.size(); ++i) CHECK(r.events[i].at("seq").as_int64() == std::int64_t(i));
  // The second turn continues the sequence.
  const TurnResult& s = turn.second;
  CHECK(s.final_response == "aaaabbbbcccc");
  REQUIRE_FALSE(s.events.empty());
  CHECK(s.events.front().at("seq").as_int64() == std::int64_t(r.events.size()));
  for (std::size_t i = 1; i < s.events.size(); ++i) {
    CHECK(s.events[i].at("seq").as_int64() == s.events[i - 1].at("seq").as_int64() + 1);
  }
  // A subscription follows the child sessions its turn starts.
  const TurnResult& sub = turn.subagent;
  CHECK(sub.final_response == "subagent said: echo: hi");
  std::size_t child_events = 0, started = 0, finished = 0;
  for (const Notification& n : sub.notifications) {
    if (n.method == "subagent.started") ++started;
    if (n.method == "subagent.finished") ++finished;
    if (n.method == "session.event" && n.params.at("sessionId") != "parent") ++child_events;
  }
  CHECK(started == 1);
  CHECK(finished == 1);
  CHECK(child_events > 0);
  CHECK(sub.notifications.size() == sub.events.size() + child_events + 2);
}

asio::awaitable<void> connect_and_run(asio::any_io_executor executor, std::string url, RealTurn& out) {
  std::unique_ptr<ClientTransport> transport = co_await connect_url(executor, std::move(url));
  Client client(executor, std::move(transport));
  co_await hello_turns(client, out, false);
}

asio::awaitable<void> dead_daemon(Client& client, std::string& what) {
  protocol::InitializeParams init;
  try {
    co_await client.initialize(std::move(init));
  } catch (const TransportClosed& e) {
    what = e.what();
  }
}

}  // namespace

TEST_CASE("client: real harnessd over stdio") {
  asio::io_context io;
  SpawnOptions spawn;
  spawn.program = harnessd_path();
  spawn.args = {"--store", "memory", "--log-level", "warn"};
  Client client(io.get_executor(), spawn_stdio(io.get_executor(), spawn));
  RealTurn turn;
  run_bounded(io, hello_turns(client, turn, true));
  check_hello(turn);
}

namespace {

struct ToolsTurn {
  harnessd::protocol::ToolsListResult tools;
  TurnResult write;
};

/// initialize with a read-only sandbox, tools/list, then a write the sandbox refuses.
asio::awaitable<void> tools_turns(Client& client, std::string cwd, ToolsTurn& out) {
  protocol::InitializeParams init;
  init.cwd = std::move(cwd);
  init.provider = "scripted";
  init.sandbox = "read-only";
  co_await client.initialize(std::move(init));
  out.tools = co_await client.tools_list();
  Harness harness(client);
  std::string session = "tools";
  std::string prompt = R"(@tool write {"file_path":"a.txt","content":"hi\n"})";
  out.write = co_await harness.run(std::move(session), std::move(prompt));
  co_await client.close();
}

}  // namespace

TEST_CASE("client: tools/list and initialize.sandbox against the real harnessd") {
  const std::filesystem::path work = std::filesystem::temp_directory_path() /
                                     ("harness-client-test-tools-" + std::to_string(::getpid()));
  std::filesystem::remove_all(work);
  std::filesystem::create_directories(work);
  asio::io_context io;
  SpawnOptions spawn;
  spawn.program = harnessd_path();
  spawn.args = {"--store", "memory", "--log-level", "warn"};
  Client client(io.get_executor(), spawn_stdio(io.get_executor(), spawn));
  ToolsTurn turn;
  run_bounded(io, tools_turns(client, work.string(), turn));

  const auto find = [&](std::string_view name) -> const harnessd::protocol::ToolInfo* {
    for (const auto& tool : turn.tools.tools) {
      if (tool.name == name) return &tool;
    }
    return nullptr;
  };
  for (const char* name : {"read", "write", "edit", "glob", "grep", "bash", "todo_write"}) {
    CAPTURE(name);
    const harnessd::protocol::ToolInfo* tool = find(name);
    REQUIRE(tool != nullptr);
    CHECK(tool->source == "builtin");
    CHECK_FALSE(tool->description.empty());
    CHECK(tool->input_schema.at("type") == "object");
  }
  CHECK(find("read")->read_only);
  CHECK_FALSE(find("write")->read_only);

  // The read-only sandbox refuses the write; the file is not created.
  CHECK(turn.write.status == "ok");
  const json::object* result = nullptr;
  for (const json::object& event : turn.write.events) {
    if (event.at("type") == "tool/result") result = &event.at("data").as_object();
  }
  REQUIRE(result != nullptr);
  CHECK(result->at("isError") == true);
  CHECK(result->at("error").at("code") == "SANDBOX_READ_ONLY");
  CHECK_FALSE(std::filesystem::exists(work / "a.txt"));
  std::filesystem::remove_all(work);
}

TEST_CASE("client: real harnessd over TCP") {
  NetworkDaemon daemon("tcp");
  asio::io_context io;
  RealTurn turn;
  run_bounded(io, connect_and_run(io.get_executor(), daemon.url(), turn));
  check_hello(turn);
}

TEST_CASE("client: real harnessd over WebSocket") {
  NetworkDaemon daemon("ws");
  asio::io_context io;
  RealTurn turn;
  run_bounded(io, connect_and_run(io.get_executor(), daemon.url(), turn));
  check_hello(turn);
}

TEST_CASE("client: a child that dies reports its exit status in TransportClosed") {
  asio::io_context io;
  SpawnOptions spawn;
  spawn.program = "/bin/false";  // `false --stdio` exits 1 at once
  Client client(io.get_executor(), spawn_stdio(io.get_executor(), spawn));
  std::string what;
  run_bounded(io, dead_daemon(client, what));
  INFO(what);
  CHECK(what.find("exited with status 1") != std::string::npos);
}

TEST_CASE("client: a child that stops reading fails the request; the caller gets no SIGPIPE") {
  // This process leaves SIGPIPE at its default, as most programs do: a write
  // to a reader that is gone must fail the request, not kill the caller.
  const std::filesystem::path script = std::filesystem::temp_directory_path() /
                                       ("harness-deaf-" + std::to_string(::getpid()) + ".sh");
  {
    std::ofstream out(script);
    out << "#!/bin/sh\nexec 0<&-\nsleep 1\n";  // stdin closed, stdout kept open for a while
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  asio::io_context io;
  SpawnOptions spawn;
  spawn.program = script.string();
  Client client(io.get_executor(), spawn_stdio(io.get_executor(), spawn));
  std::this_thread::sleep_for(300ms);  // the child has closed its stdin by now
  std::string what;
  run_bounded(io, dead_daemon(client, what));
  std::filesystem::remove(script);
  INFO(what);
  CHECK_FALSE(what.empty());
}

TEST_CASE("client: BlockingClient and BlockingHarness from a plain thread") {
  SpawnOptions spawn;
  spawn.program = harnessd_path();
  spawn.args = {"--store", "memory", "--log-level", "warn"};
  std::unique_ptr<BlockingClient> client = BlockingClient::spawn(spawn);
  CHECK(client->initialize().get().server_name == "deepseek-harness-sdk-runtime");
  BlockingHarness harness(*client);
  std::atomic<int> seen{0};
  TurnResult result = harness.run("blocking", "hello", [&seen](const Notification&) { ++seen; }).get();
  CHECK(result.status == "ok");
  CHECK(result.final_response == "echo: hello");
  CHECK(seen.load() == static_cast<int>(result.notifications.size()));
  CHECK_FALSE(client->session_cancel("blocking").get());
  CHECK_THROWS_AS(client->request("no/such/method", nullptr).get(), RpcError);
  client->shutdown().get();
}

namespace {

/// Collects a subscription's events on the client's thread; `ended` is set by
/// the first turn/end.
struct EventCollector {
  std::mutex mutex;
  std::vector<json::object> events;
  std::promise<void> ended;
  bool ended_set = false;

  NotificationHandler handler() {
    return [this](const Notification& n) {
      std::lock_guard lock(mutex);
      events.push_back(n.params.at("event").as_object());
      if (events.back().at("type") == "turn/end" && !ended_set) {
        ended_set = true;
        ended.set_value();
      }
    };
  }
  std::vector<std::int64_t> seqs() {
    std::lock_guard lock(mutex);
    std::vector<std::int64_t> out;
    for (const auto& e : events) out.push_back(e.at("seq").as_int64());
    return out;
  }
};

std::vector<std::int64_t> seq_range(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = from; i <= to; ++i) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("client: real harnessd session/list, session/events, session/subscribe and onDisconnect continue") {
  const std::filesystem::path root = std::filesystem::temp_directory_path() /
                                     ("harness-client-test-sessions-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  {
    NetworkDaemon daemon("tcp", {"--session-root", root.string()});
    std::unique_ptr<BlockingClient> a = BlockingClient::connect(daemon.url());
    const protocol::InitializeResult init = a->initialize().get();
    REQUIRE(init.supports("session/subscribe"));
    CHECK(a->session_prompt("R", "hello").get().status == protocol::TurnStatus::ok);

    // session/list
    const protocol::ListResult list = a->session_list().get();
    const auto r = std::find_if(list.sessions.begin(), list.sessions.end(),
                                [](const protocol::SessionSummary& s) { return s.session_id == "R"; });
    REQUIRE(r != list.sessions.end());
    CHECK(r->last_seq == 10);
    CHECK(r->turns == 1);
    CHECK_FALSE(r->running);
    CHECK(r->created_at > 0);
    CHECK(r->updated_at >= r->created_at);

    // session/events, whole and in pages
    const protocol::EventsResult all = a->session_events("R").get();
    REQUIRE(all.events.size() == 11);
    CHECK(json::parse(all.events.front()).at("type") == "turn/start");
    CHECK(json::parse(all.events.back()).at("type") == "turn/end");
    CHECK(all.last_seq == 10);
    CHECK_FALSE(all.more);
    const protocol::EventsResult page = a->session_events("R", 2, 3).get();
    REQUIRE(page.events.size() == 3);
    CHECK(json::parse(page.events.front()).at("seq") == 3);
    CHECK(page.more);
    try {
      a->session_events("no-such-session").get();
      FAIL("session/events of an unknown session succeeded");
    } catch (const RpcError& e) {
      CHECK(e.code() == -32602);
    }

    // session/subscribe from another connection: replay, then live events.
    std::unique_ptr<BlockingClient> b = BlockingClient::connect(daemon.url());
    b->initialize().get();
    EventCollector replay;
    SessionSubscription replayed = b->session_subscribe("R", 4, replay.handler()).get();
    CHECK(replayed.last_seq == 10);
    CHECK(replay.seqs() == seq_range(5, 10));  // all before the response
    CHECK(b->session_unsubscribe("R").get());
    replayed.events.reset();

    EventCollector live;
    SessionSubscription following = b->session_subscribe("R", 10, live.handler()).get();
    CHECK(following.last_seq == 10);
    CHECK(a->session_prompt("R", "@chunks 3 4").get().status == protocol::TurnStatus::ok);
    REQUIRE(live.ended.get_future().wait_for(10s) == std::future_status::ready);
    const std::vector<std::int64_t> seqs = live.seqs();
    REQUIRE_FALSE(seqs.empty());
    CHECK(seqs == seq_range(11, seqs.back()));
    CHECK(b->session_unsubscribe("R").get());
    CHECK_FALSE(b->session_unsubscribe("R").get());

    // onDisconnect continue: the turn outlives its connection; a subscriber sees it end.
    std::unique_ptr<BlockingClient> c = BlockingClient::connect(daemon.url());
    protocol::InitializeParams detach;
    detach.on_disconnect = protocol::OnDisconnect::continue_running;
    c->initialize(detach).get();
    std::future<protocol::PromptResult> detached = c->session_prompt("D", "@chunks 20 4\n@delay 20");
    std::this_thread::sleep_for(100ms);  // the turn is running
    c.reset();                           // the connection ends
    CHECK_THROWS_AS(detached.get(), TransportClosed);
    EventCollector rest;
    std::int64_t after = -1;
    SessionSubscription resumed{};
    try {
      resumed = b->session_subscribe("D", after, rest.handler()).get();
    } catch (const RpcError& e) {
      FAIL("subscribe to the detached session failed: " << e.what());
    }
    REQUIRE(rest.ended.get_future().wait_for(10s) == std::future_status::ready);
    std::lock_guard lock(rest.mutex);
    CHECK(rest.events.back().at("data").at("reason").at("kind") == "completed");
    CHECK(rest.events.front().at("seq") == 0);
  }
  std::filesystem::remove_all(root);
}

TEST_CASE("client: session/delete against a real harnessd, typed") {
  NetworkDaemon daemon("tcp", {"--store", "memory"});
  std::unique_ptr<BlockingClient> client = BlockingClient::connect(daemon.url());
  REQUIRE(client->initialize().get().supports("session/delete"));
  CHECK(client->session_prompt("D", "hello").get().status == protocol::TurnStatus::ok);
  CHECK(client->session_delete("D").get().deleted);
  const protocol::ListResult list = client->session_list().get();
  CHECK(std::none_of(list.sessions.begin(), list.sessions.end(),
                     [](const protocol::SessionSummary& s) { return s.session_id == "D"; }));
  try {
    client->session_delete("D").get();
    FAIL("a second session/delete succeeded");
  } catch (const RpcError& e) {
    CHECK(e.code() == -32602);
    CHECK(std::string(e.what()) == "unknown session: D");
    CHECK(e.data() == json::parse(R"({"sessionId":"D"})"));
  }
  client->close().get();
}

TEST_CASE("client: a tls:// URL on a plain NDJSON port fails its handshake with a ClientError") {
  NetworkDaemon daemon("tcp");
  std::string url = daemon.url();
  url.replace(0, 3, "tls");
  try {
    BlockingClient::connect(url);
    FAIL("connected");
  } catch (const CertificateError&) {
    FAIL("not a certificate problem");
  } catch (const ClientError& e) {
    CHECK(std::string(e.what()).find("TLS handshake with 127.0.0.1:") != std::string::npos);
  }
}

namespace {

namespace protocol = harnessd::protocol;

struct DecisionTurns {
  std::vector<protocol::ApprovalRequested> requested;
  std::vector<protocol::ApprovalResolved> resolved;
  std::vector<protocol::QuestionRequested> questions;
  std::vector<protocol::QuestionResolved> answered;
  std::vector<std::string> decide_errors;
  TurnResult allowed;
  TurnResult rejected;
  TurnResult asked;
  int not_pending_code = 0;
  std::string not_pending_reason;
};

/// Under approvalPolicy ask: the first write is allowed once, the second
/// rejected with a message, then a question is answered; every decision is
/// sent from the notification handler, as an interactive client would.
asio::awaitable<void> decision_turns(Client& client, std::string cwd, DecisionTurns& out) {
  protocol::InitializeParams init;
  init.cwd = std::move(cwd);
  init.provider = "scripted";
  init.approval_policy = protocol::ApprovalPolicy::ask;
  co_await client.initialize(std::move(init));
  const std::string session = "decide";
  const auto on_decision_error = [&out](std::exception_ptr e, protocol::DecisionResult result) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& error) {
        out.decide_errors.emplace_back(error.what());
      }
    } else if (!result.accepted) {
      out.decide_errors.emplace_back("not accepted");
    }
  };
  const auto on_note = [&](const Notification& n) {
    if (std::optional<protocol::ApprovalRequested> req = as_approval_requested(n)) {
      out.requested.push_back(*req);
      const bool first = out.requested.size() == 1;
      asio::co_spawn(client.executor(),
                     client.session_approve(session, req->approval_id,
                                            first ? protocol::ApprovalOutcome::allowed_once
                                                  : protocol::ApprovalOutcome::rejected,
                                            first ? std::nullopt : std::optional<std::string>("not b.txt")),
                     on_decision_error);
    }
    if (std::optional<protocol::ApprovalResolved> res = as_approval_resolved(n)) out.resolved.push_back(*res);
    if (std::optional<protocol::QuestionRequested> q = as_question_requested(n)) {
      out.questions.push_back(*q);
      std::vector<protocol::Answer> answers{{.id = "db", .selected = {"SQLite"}, .custom = "a file"}};
      asio::co_spawn(client.executor(), client.session_answer(session, q->question_id, std::move(answers)),
                     on_decision_error);
    }
    if (std::optional<protocol::QuestionResolved> res = as_question_resolved(n)) out.answered.push_back(*res);
  };
  Harness harness(client);
  out.allowed = co_await harness.run(session, R"(@tool write {"file_path":"a.txt","content":"allowed\n"})", on_note);
  out.rejected = co_await harness.run(session, R"(@tool write {"file_path":"b.txt","content":"no\n"})", on_note);
  out.asked = co_await harness.run(
      session,
      R"(@tool ask_user_question {"questions":[{"id":"db","question":"Which?","options":[{"label":"Postgres"},{"label":"SQLite"}]}]})",
      on_note);
  try {
    co_await client.session_approve(session, out.requested.at(0).approval_id, protocol::ApprovalOutcome::allowed_once);
  } catch (const RpcError& e) {
    out.not_pending_code = e.code();
    if (const json::object* data = e.data().if_object()) {
      if (const json::value* reason = data->if_contains("reason"); reason != nullptr && reason->is_string()) {
        out.not_pending_reason = std::string(reason->get_string());
      }
    }
  }
  co_await client.close();
}

std::string tool_result_text(const TurnResult& turn) {
  for (const json::object& event : turn.events) {
    if (event.at("type") != "tool/result") continue;
    const json::object& data = event.at("data").as_object();
    return std::string(data.at("content").as_array().at(0).as_object().at("text").as_string());
  }
  return {};
}

}  // namespace

TEST_CASE("client: session_approve and session_answer against the real harnessd") {
  const std::filesystem::path work = std::filesystem::temp_directory_path() /
                                     ("harness-client-test-decide-" + std::to_string(::getpid()));
  std::filesystem::remove_all(work);
  std::filesystem::create_directories(work);
  asio::io_context io;
  SpawnOptions spawn;
  spawn.program = harnessd_path();
  spawn.args = {"--store", "memory", "--log-level", "warn"};
  Client client(io.get_executor(), spawn_stdio(io.get_executor(), spawn));
  DecisionTurns turns;
  run_bounded(io, decision_turns(client, work.string(), turns));

  CHECK(turns.decide_errors.empty());
  REQUIRE(turns.requested.size() == 2);
  const protocol::ApprovalRequested& first = turns.requested[0];
  CHECK(first.tool_name == "write");
  CHECK(first.call_id == "call_0");
  CHECK(json::parse(first.arguments) == json::parse(R"({"file_path":"a.txt","content":"allowed\n"})"));
  CHECK_FALSE(first.reason.empty());
  REQUIRE(turns.resolved.size() == 2);
  CHECK(turns.resolved[0].approval_id == first.approval_id);
  CHECK(turns.resolved[0].outcome == protocol::ApprovalOutcome::allowed_once);
  CHECK(turns.resolved[0].source == protocol::DecisionSource::client);
  CHECK(turns.resolved[1].outcome == protocol::ApprovalOutcome::rejected);

  CHECK(turns.allowed.status == "ok");
  std::ifstream written(work / "a.txt");
  CHECK(std::string((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>()) == "allowed\n");
  CHECK_FALSE(std::filesystem::exists(work / "b.txt"));
  CHECK(tool_result_text(turns.rejected).find("not b.txt") != std::string::npos);

  REQUIRE(turns.questions.size() == 1);
  CHECK(turns.questions[0].questions.size() == 1);
  REQUIRE(turns.answered.size() == 1);
  CHECK(turns.answered[0].outcome == protocol::QuestionOutcome::answered);
  CHECK(json::parse(tool_result_text(turns.asked)) ==
        json::parse(R"([{"id":"db","selected":["SQLite"],"custom":"a file"}])"));

  CHECK(turns.not_pending_code == -32602);
  CHECK(turns.not_pending_reason == "not-pending");
  std::filesystem::remove_all(work);
}

TEST_CASE("client: decision events read typed, other events are nullopt, malformed ones ProtocolError") {
  const json::object requested = json::parse(R"({"type":"approval/requested","seq":3,"time":1,"data":{
      "turn":0,"step":0,"callId":"c","approvalId":"ap1","toolName":"bash","arguments":"{}","reason":"runs"}})")
                                     .as_object();
  const std::optional<harnessd::protocol::ApprovalRequested> got = as_approval_requested(requested);
  REQUIRE(got.has_value());
  CHECK(got->approval_id == "ap1");
  CHECK(got->tool_name == "bash");
  CHECK_FALSE(as_approval_resolved(requested).has_value());
  CHECK_FALSE(as_question_requested(requested).has_value());

  Notification n;
  n.method = "session.event";
  n.params = json::object{{"sessionId", "s"}, {"event", requested}};
  CHECK(as_approval_requested(n).has_value());
  n.method = "subagent.started";
  CHECK_FALSE(as_approval_requested(n).has_value());

  const json::object bad = json::parse(R"({"type":"approval/resolved","data":{"approvalId":"a","outcome":"maybe","source":"client"}})").as_object();
  CHECK_THROWS_AS(as_approval_resolved(bad), ProtocolError);
}
