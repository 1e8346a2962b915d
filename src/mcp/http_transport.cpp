#include "mcp/http_transport.hpp"

#include "llm/sse_parser.hpp"
#include "harnessd/util/url.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <variant>

namespace harnessd::mcp {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace json = boost::json;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr std::array<std::string_view, 2> http_schemes{"http", "https"};
constexpr util::UrlRules http_rules{.schemes = http_schemes, .default_port = true, .path = true, .query = true};

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

/// One HTTP exchange's connection (a new one per message: MCP traffic is a
/// few messages per tool call, and a fresh connection never carries a
/// half-read answer of an abandoned call).
struct Connection {
  std::variant<PlainStream, TlsStream> stream;
  beast::flat_buffer buffer;

  beast::tcp_stream& lowest() {
    if (auto* plain = std::get_if<PlainStream>(&stream)) return *plain;
    return beast::get_lowest_layer(std::get<TlsStream>(stream));
  }
};

/// A JSON-RPC error answer to `id`, for a request the server did not answer.
// An answer stream that ends early is resumed at most this many times in a
// row, after its `retry` time (this much when it gives none, capped).
constexpr int max_resumes = 8;
constexpr std::int64_t default_retry_ms = 500;
constexpr std::int64_t max_retry_ms = 30'000;

std::string error_answer(std::int64_t id, const std::string& message) {
  json::object error{{"code", -32000}, {"message", message}};
  json::object answer{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
  return json::serialize(answer);
}

class HttpTransport final : public Transport, public std::enable_shared_from_this<HttpTransport> {
 public:
  HttpTransport(Strand strand, const ServerConfig& config, const Options& options)
      : strand_(std::move(strand)), config_(config), options_(options) {
    tls_.set_default_verify_paths();
    tls_.set_verify_mode(ssl::verify_peer);
  }

  void start(Handlers handlers) override {
    handlers_ = std::move(handlers);
    util::ParsedUrl parsed = util::parse_url(config_.url, http_rules);
    if (!parsed.url) {
      asio::post(strand_, [self = shared_from_this(), reason = parsed.error.reason] {
        self->closed("bad url: " + reason);
      });
      return;
    }
    url_ = *parsed.url;
    const bool default_port = url_.port == (url_.scheme == "https" ? 443 : 80);
    const std::string host_port = url_.host_port();
    host_header_ = default_port ? host_port.substr(0, host_port.rfind(':')) : host_port;
  }

  void send(std::string message, std::optional<std::int64_t> request_id) override {
    if (done_) return;
    asio::co_spawn(strand_, exchange(shared_from_this(), http::verb::post, std::move(message), request_id),
                   asio::detached);
  }

  void abandon(std::int64_t request_id) override {
    auto it = open_.find(request_id);
    if (it == open_.end()) return;
    error_code ignored;
    it->second->lowest().socket().close(ignored);
    open_.erase(it);  // what fails from here on says nothing about the server
  }

  void set_protocol_version(std::string version) override { protocol_version_ = std::move(version); }

  void listen() override {
    if (done_) return;
    asio::co_spawn(strand_, exchange(shared_from_this(), http::verb::get, std::string(), std::nullopt), asio::detached);
  }

  void stop() override {
    done_ = true;
    handlers_ = {};
    close_all();
  }

 private:
  /// The connection for one exchange, not yet connected.
  std::shared_ptr<Connection> make_connection() {
    if (url_.scheme == "https") return std::make_shared<Connection>(Connection{TlsStream(strand_, tls_), {}});
    return std::make_shared<Connection>(Connection{PlainStream(strand_), {}});
  }

  /// Connects `connection`; false with `error` set on failure.
  static asio::awaitable<bool> connect(std::shared_ptr<HttpTransport> self, std::shared_ptr<Connection> connection,
                                       std::string& error) {
    tcp::resolver resolver(self->strand_);
    error_code ec;
    const std::string port = std::to_string(self->url_.port);
    const tcp::resolver::results_type endpoints =
        co_await resolver.async_resolve(self->url_.host, port, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      error = "cannot resolve " + self->url_.host + ": " + ec.message();
      co_return false;
    }
    if (self->done_) co_return false;
    beast::tcp_stream& lowest = connection->lowest();
    lowest.expires_after(self->options_.connect_timeout);
    co_await lowest.async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      error = "cannot connect to " + self->url_.host_port() + ": " + ec.message();
      co_return false;
    }
    if (auto* tls_stream = std::get_if<TlsStream>(&connection->stream)) {
      if (!SSL_set_tlsext_host_name(tls_stream->native_handle(), self->url_.host.c_str())) {
        error = "cannot set the TLS server name";
        co_return false;
      }
      tls_stream->set_verify_callback(ssl::host_name_verification(self->url_.host));
      co_await tls_stream->async_handshake(ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        error = "TLS handshake with " + self->url_.host + " failed: " + ec.message();
        co_return false;
      }
    }
    lowest.expires_never();
    co_return true;
  }

  /// Where a request's SSE stream that ended before its answer goes on: a
  /// GET naming the last event seen, after the stream's retry time.
  struct Resume {
    std::string last_event_id;
    std::chrono::milliseconds delay;
  };

  /// One POST (a message) or GET (the server's own stream) and its answer;
  /// a request's answer stream that ends early is resumed (Last-Event-ID).
  static asio::awaitable<void> exchange(std::shared_ptr<HttpTransport> self, http::verb verb, std::string body,
                                        std::optional<std::int64_t> request_id) {
    const std::int64_t key = request_id ? *request_id : --self->next_anonymous_;
    std::string last_event_id;  // set for a resuming GET
    for (int resumes = 0;; ++resumes) {
      // Registered before connecting, so stop() and abandon() reach a
      // connect that hangs too.
      std::shared_ptr<Connection> connection = self->make_connection();
      self->open_[key] = connection;
      std::string error;
      const bool connected = co_await connect(self, connection, error);
      const bool abandoned = self->open_.erase(key) == 0;
      if (!connected || self->done_ || abandoned) {
        // Unreachable: the server is down until a restart reaches it again.
        if (!connected && !abandoned && (verb == http::verb::post || request_id)) self->closed(error);
        co_return;
      }
      self->open_[key] = connection;
      const bool may_resume = resumes < max_resumes;
      std::optional<Resume> resume;
      if (std::holds_alternative<TlsStream>(connection->stream)) {
        resume = co_await run_exchange(self, std::get<TlsStream>(connection->stream), *connection, verb,
                                       std::move(body), request_id, last_event_id, may_resume);
      } else {
        resume = co_await run_exchange(self, std::get<PlainStream>(connection->stream), *connection, verb,
                                       std::move(body), request_id, last_event_id, may_resume);
      }
      // The closed connection stays registered while the resume waits: an
      // abandon() in between erases it, and the resume does not happen.
      if (!resume || self->done_ || !self->open_.contains(key)) {
        self->open_.erase(key);
        co_return;
      }
      spdlog::debug("mcp {}: the answer stream of request {} ended early; resuming after event {} in {} ms",
                    self->config_.name, key, resume->last_event_id, resume->delay.count());
      asio::steady_timer wait(self->strand_, resume->delay);
      error_code ec;
      co_await wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (self->done_ || !self->open_.contains(key)) co_return;
      verb = http::verb::get;
      body.clear();
      last_event_id = std::move(resume->last_event_id);
    }
  }

  /// Whether `message` is the answer (result or error) to request `id`.
  static bool answers(std::string_view message, std::int64_t id) {
    error_code ec;
    const json::value parsed = json::parse(message, ec);
    const json::object* object = ec ? nullptr : parsed.if_object();
    if (object == nullptr || (!object->contains("result") && !object->contains("error"))) return false;
    const json::value* answered = object->if_contains("id");
    return answered != nullptr && answered->is_int64() && answered->get_int64() == id;
  }

  /// Returns where to resume when `may_resume` and a request's SSE answer
  /// stream ended, cleanly or not, before the answer but after an event ID.
  template <class Stream>
  static asio::awaitable<std::optional<Resume>> run_exchange(std::shared_ptr<HttpTransport> self, Stream& stream,
                                                             Connection& connection, http::verb verb, std::string body,
                                                             std::optional<std::int64_t> request_id,
                                                             std::string last_event_id, bool may_resume) {
    beast::tcp_stream& lowest = connection.lowest();
    connection.buffer.max_size(1 << 20);
    http::request<http::string_body> request{verb, self->url_.target(), 11};
    request.set(http::field::host, self->host_header_);
    request.set(http::field::user_agent, "harnessd");
    request.set(http::field::accept, verb == http::verb::get ? "text/event-stream"
                                                            : "application/json, text/event-stream");
    if (!self->session_id_.empty()) request.set("Mcp-Session-Id", self->session_id_);
    if (!self->protocol_version_.empty()) request.set("MCP-Protocol-Version", self->protocol_version_);
    if (!last_event_id.empty()) request.set("Last-Event-ID", last_event_id);
    for (const auto& [name, value] : self->config_.headers) request.set(name, value);
    if (verb == http::verb::post) {
      request.set(http::field::content_type, "application/json");
      request.body() = std::move(body);
    }
    request.keep_alive(false);
    request.prepare_payload();
    error_code ec;
    lowest.expires_after(self->options_.request_timeout);
    co_await http::async_write(stream, request, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      self->fail_request(request_id, "sending to the MCP server failed: " + ec.message());
      co_return std::nullopt;
    }
    // A request's wait is bounded by its caller (timeout, cancel: abandon);
    // a notification's answer is only an acknowledgement.
    if (request_id || verb == http::verb::get) lowest.expires_never();
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    co_await http::async_read_header(stream, connection.buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      self->fail_request(request_id, "the MCP server sent no answer: " + ec.message());
      co_return std::nullopt;
    }
    if (self->done_) co_return std::nullopt;
    const unsigned status = parser.get().result_int();
    if (const auto id = parser.get()["Mcp-Session-Id"]; !id.empty() && self->session_id_.empty()) {
      self->session_id_ = std::string(id);
    }
    if (status == 202 || status == 204) co_return std::nullopt;
    if (verb == http::verb::get && !request_id && status != 200) {
      spdlog::debug("mcp {}: no server stream (HTTP {})", self->config_.name, status);
      co_return std::nullopt;
    }
    if (status == 404 && !self->session_id_.empty()) {
      // The server forgot our session: a new one begins with initialize.
      self->closed("the MCP session expired (HTTP 404)");
      co_return std::nullopt;
    }
    if (status != 200) {
      self->fail_request(request_id, "the MCP server answered HTTP " + std::to_string(status));
      co_return std::nullopt;
    }
    const std::string content_type(parser.get()[http::field::content_type]);
    const bool sse = content_type.find("text/event-stream") != std::string::npos;
    llm::SseParser events_parser(llm::SseParser::Limits{self->options_.max_message_bytes, self->options_.max_message_bytes});
    std::vector<llm::SseParser::Event> events;
    std::string whole;
    bool answered = false;
    std::array<char, 16 * 1024> chunk{};
    while (!parser.is_done()) {
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      co_await http::async_read_some(stream, connection.buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec || self->done_) break;
      const std::string_view got(chunk.data(), chunk.size() - parser.get().body().size);
      if (!sse) {
        if (whole.size() + got.size() > self->options_.max_message_bytes) {
          self->fail_request(request_id, "the MCP server's answer exceeds " +
                                             std::to_string(self->options_.max_message_bytes) + " bytes");
          co_return std::nullopt;
        }
        whole.append(got);
        continue;
      }
      events_parser.feed(got, events);
      for (llm::SseParser::Event& event : events) {
        if (self->done_) co_return std::nullopt;
        if ((event.event.empty() || event.event == "message") && !event.data.empty() && self->handlers_.on_message) {
          if (request_id && !answered) answered = answers(event.data, *request_id);
          self->handlers_.on_message(std::move(event.data));
        }
      }
      events.clear();
      if (events_parser.error() != llm::SseParser::Error::none) {
        spdlog::warn("mcp {}: {}", self->config_.name, events_parser.error_message());
        break;
      }
    }
    if (self->done_) co_return std::nullopt;
    if (!sse && parser.is_done() && self->handlers_.on_message) self->handlers_.on_message(std::move(whole));
    // A server may end an answer stream early and keep the rest for a GET
    // that names the last event seen, after the stream's `retry` time.
    const std::string& resume_after =
        events_parser.last_event_id().empty() ? last_event_id : events_parser.last_event_id();
    if (sse && request_id && !answered && may_resume && !resume_after.empty() &&
        events_parser.error() == llm::SseParser::Error::none) {
      const std::int64_t delay = std::min(events_parser.retry_ms().value_or(default_retry_ms), max_retry_ms);
      co_return Resume{resume_after, std::chrono::milliseconds(delay)};
    }
    // Ignored by the client when the answer came; otherwise the call ends
    // now instead of at its timeout.
    self->fail_request(request_id, "the MCP server ended its HTTP answer without a result");
    co_return std::nullopt;
  }

  /// A request whose answer cannot come gets an error answer at once,
  /// rather than waiting out its timeout.
  void fail_request(std::optional<std::int64_t> request_id, const std::string& message) {
    spdlog::debug("mcp {}: {}", config_.name, message);
    if (done_ || !request_id || !handlers_.on_message) return;
    handlers_.on_message(error_answer(*request_id, message));
  }

  void closed(const std::string& reason) {
    if (done_) return;
    done_ = true;
    auto on_closed = std::move(handlers_.on_closed);
    handlers_ = {};
    close_all();
    if (on_closed) on_closed(reason);
  }

  void close_all() {
    for (auto& [key, connection] : open_) {
      error_code ignored;
      connection->lowest().socket().close(ignored);
    }
  }

  Strand strand_;
  const ServerConfig config_;
  const Options options_;
  ssl::context tls_{ssl::context::tls_client};
  Handlers handlers_;
  util::Url url_;
  std::string host_header_;
  std::string session_id_;
  std::string protocol_version_;
  std::map<std::int64_t, std::shared_ptr<Connection>> open_;  ///< by request id; GETs and notifications below 0
  std::int64_t next_anonymous_ = 0;
  bool done_ = false;
};

}  // namespace

std::string check_http_url(const std::string& url) {
  const util::ParsedUrl parsed = util::parse_url(url, http_rules);
  return parsed.url ? std::string() : parsed.error.reason;
}

std::shared_ptr<Transport> make_http_transport(Strand strand, const ServerConfig& config, const Options& options) {
  return std::make_shared<HttpTransport>(std::move(strand), config, options);
}

}  // namespace harnessd::mcp
