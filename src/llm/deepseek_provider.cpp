// One model call = one POST /chat/completions with stream:true. Connections
// are pooled (keep-alive); every wait has a deadline; cancel closes the
// socket so the call ends at once; 429/5xx/connect failures are retried with
// backoff only while nothing has been streamed to the client yet.
#include "llm/deepseek_provider.hpp"

#include "llm/openai_format.hpp"
#include "llm/sse_parser.hpp"
#include "util/json_limits.hpp"
#include "harnessd/util/url.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
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
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <variant>

namespace harnessd::llm {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace json = boost::json;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

/// Whether an HTTP 400's message says the request was over the model's
/// context window ("maximum context length is N tokens", "context_length_exceeded").
bool says_context_is_too_long(std::string_view detail) {
  std::string lower(detail);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("context length") != std::string::npos || lower.find("context_length") != std::string::npos ||
         lower.find("context window") != std::string::npos;
}

struct BaseUrl {
  bool tls = true;
  std::string host;         ///< IPv6 without brackets
  std::string port;         ///< for the resolver
  std::string host_port;    ///< "HOST:PORT", for messages
  std::string host_header;  ///< the Host header: HOST, with :PORT unless the scheme's default
  std::string path;         ///< without trailing '/'
};

BaseUrl parse_base_url(std::string_view text) {
  static constexpr std::array<std::string_view, 2> schemes{"https", "http"};
  static constexpr util::UrlRules rules{.schemes = schemes, .default_port = true, .path = true};
  util::ParsedUrl parsed = util::parse_url(text, rules);
  if (!parsed.url) {
    switch (parsed.error.kind) {
      case util::UrlError::Kind::not_url:
      case util::UrlError::Kind::scheme:
        throw std::invalid_argument("DEEPSEEK_BASE_URL must start with https:// or http://");
      case util::UrlError::Kind::no_host: throw std::invalid_argument("DEEPSEEK_BASE_URL has no host");
      case util::UrlError::Kind::malformed: break;
    }
    throw std::invalid_argument("DEEPSEEK_BASE_URL \"" + std::string(text) + "\": " + parsed.error.reason);
  }
  const util::Url& url = *parsed.url;
  BaseUrl out;
  out.tls = url.scheme == "https";
  out.host = url.host;
  out.port = std::to_string(url.port);
  out.host_port = url.host_port();
  const bool default_port = url.port == (out.tls ? 443 : 80);
  out.host_header = default_port ? out.host_port.substr(0, out.host_port.rfind(':')) : out.host_port;
  out.path = url.path;
  while (!out.path.empty() && out.path.back() == '/') out.path.pop_back();
  return out;
}

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

struct HttpConnection {
  std::variant<PlainStream, TlsStream> stream;
  beast::flat_buffer buffer;

  beast::tcp_stream& lowest() {
    if (auto* plain = std::get_if<PlainStream>(&stream)) return *plain;
    return beast::get_lowest_layer(std::get<TlsStream>(stream));
  }
  bool is_open() { return lowest().socket().is_open(); }
};

/// How one HTTP exchange ended.
struct Attempt {
  ModelResult result;
  bool retryable = false;
  bool reusable = false;  ///< the connection can serve the next call
  std::chrono::milliseconds retry_after{0};
};

ModelResult too_large_result(std::string message) {
  return error_result(std::move(message), errc::stream_too_large);
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

DeepSeekConfig deepseek_config_from_env() {
  DeepSeekConfig config;
  if (const char* key = std::getenv("DEEPSEEK_API_KEY")) config.api_key = key;
  if (const char* base = std::getenv("DEEPSEEK_BASE_URL"); base != nullptr && *base != '\0') config.base_url = base;
  return config;
}

std::optional<std::int64_t> DeepSeekProvider::context_window(std::string_view model) const {
  if (auto it = config_.context_windows.find(model); it != config_.context_windows.end()) return it->second;
  return std::nullopt;
}

struct DeepSeekProvider::Impl {
  asio::any_io_executor executor;
  ssl::context tls{ssl::context::tls_client};
  BaseUrl url;
  std::mutex mutex;
  std::vector<std::unique_ptr<HttpConnection>> idle;

  std::unique_ptr<HttpConnection> take_idle() {
    std::lock_guard lock(mutex);
    while (!idle.empty()) {
      auto connection = std::move(idle.back());
      idle.pop_back();
      if (connection->is_open()) return connection;
    }
    return nullptr;
  }

  void give_back(std::unique_ptr<HttpConnection> connection, std::size_t max_idle) {
    std::lock_guard lock(mutex);
    if (idle.size() < max_idle) idle.push_back(std::move(connection));
  }
};

DeepSeekProvider::DeepSeekProvider(asio::any_io_executor executor, DeepSeekConfig config)
    : config_(std::move(config)), impl_(std::make_unique<Impl>()) {
  impl_->executor = std::move(executor);
  impl_->url = parse_base_url(config_.base_url);
  impl_->tls.set_default_verify_paths();
  impl_->tls.set_verify_mode(ssl::verify_peer);
}

DeepSeekProvider::~DeepSeekProvider() = default;

namespace {

/// Opens a connection to `url`; nullptr with `error` set on failure.
asio::awaitable<std::unique_ptr<HttpConnection>> open_connection(const asio::any_io_executor& executor,
                                                                 ssl::context& tls, const BaseUrl& url,
                                                                 std::chrono::milliseconds timeout,
                                                                 CancelScope& cancel, std::string& error) {
  tcp::resolver resolver(executor);
  error_code ec;
  tcp::resolver::results_type endpoints;
  {
    CancelScope::Hook hook(cancel, [&resolver] { resolver.cancel(); });
    endpoints = co_await resolver.async_resolve(url.host, url.port, asio::redirect_error(asio::use_awaitable, ec));
  }
  if (ec) {
    error = "cannot resolve " + url.host + ": " + ec.message();
    co_return nullptr;
  }
  std::unique_ptr<HttpConnection> connection;
  if (url.tls) {
    connection.reset(new HttpConnection{TlsStream(executor, tls), {}});
  } else {
    connection.reset(new HttpConnection{PlainStream(executor), {}});
  }
  beast::tcp_stream& lowest = connection->lowest();
  CancelScope::Hook hook(cancel, [&lowest] { lowest.close(); });
  lowest.expires_after(timeout);
  co_await lowest.async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    error = "cannot connect to " + url.host_port + ": " + ec.message();
    co_return nullptr;
  }
  lowest.socket().set_option(tcp::no_delay(true), ec);
  if (auto* tls_stream = std::get_if<TlsStream>(&connection->stream)) {
    if (!SSL_set_tlsext_host_name(tls_stream->native_handle(), url.host.c_str())) {
      error = "cannot set TLS server name";
      co_return nullptr;
    }
    tls_stream->set_verify_callback(ssl::host_name_verification(url.host));
    co_await tls_stream->async_handshake(ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      error = "TLS handshake with " + url.host + " failed: " + ec.message();
      co_return nullptr;
    }
  }
  lowest.expires_never();
  co_return connection;
}

/// Sends the request and streams the answer into `sink`.
template <class Stream>
asio::awaitable<Attempt> exchange(Stream& stream, HttpConnection& connection, const BaseUrl& url,
                                  const DeepSeekConfig& config, const std::string& body, ChunkSink& sink,
                                  CancelScope& cancel) {
  beast::tcp_stream& lowest = connection.lowest();
  CancelScope::Hook hook(cancel, [&lowest] { lowest.close(); });
  Attempt attempt;
  error_code ec;
  // Beast grows this buffer until it holds a whole header or chunk-size
  // line; the bound turns an endless one into buffer_overflow.
  connection.buffer.max_size(config.max_http_buffer_bytes);

  http::request<http::string_body> request{http::verb::post, url.path + "/chat/completions", 11};
  request.set(http::field::host, url.host_header);
  if (!config.api_key.empty()) request.set(http::field::authorization, "Bearer " + config.api_key);
  request.set(http::field::content_type, "application/json");
  request.set(http::field::accept, "text/event-stream");
  request.set(http::field::user_agent, "harnessd");
  request.keep_alive(true);
  request.body() = body;
  request.prepare_payload();

  lowest.expires_after(config.first_byte_timeout);
  co_await http::async_write(stream, request, asio::redirect_error(asio::use_awaitable, ec));
  if (cancel.cancelled()) co_return Attempt{ModelResult{FinishReason::cancelled}};
  if (ec) {
    attempt.result = error_result("sending the request failed: " + ec.message(), errc::connection);
    attempt.retryable = true;
    co_return attempt;
  }

  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  co_await http::async_read_header(stream, connection.buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
  if (cancel.cancelled()) co_return Attempt{ModelResult{FinishReason::cancelled}};
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    // Beast's header limit (8 KiB): deterministic, so not worth a retry.
    co_return Attempt{too_large_result("the model endpoint sent oversized response headers")};
  }
  if (ec) {
    const bool timed_out = ec == beast::error::timeout;
    attempt.result = error_result(timed_out ? "no answer from the model within the first-byte timeout"
                                            : "the connection closed before an answer: " + ec.message(),
                                  timed_out ? errc::timeout : errc::stream_closed);
    attempt.retryable = true;
    co_return attempt;
  }

  std::array<char, 16 * 1024> chunk_buffer;
  const unsigned status = parser.get().result_int();
  if (status != 200) {
    // Read only as far as an error message can be useful; the rest is
    // dropped with the connection (never reused: reusable stays false).
    std::string error_body;
    while (!parser.is_done() && error_body.size() < config.max_error_body_bytes) {
      parser.get().body().data = chunk_buffer.data();
      parser.get().body().size = std::min(chunk_buffer.size(), config.max_error_body_bytes - error_body.size());
      const std::size_t offered = parser.get().body().size;
      co_await http::async_read_some(stream, connection.buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) break;
      error_body.append(chunk_buffer.data(), offered - parser.get().body().size);
    }
    const std::string detail = openai::error_detail(error_body);
    const std::string message = "the model endpoint answered HTTP " + std::to_string(status) +
                                (detail.empty() ? "" : ": " + detail);
    if (status == 401 || status == 403) {
      attempt.result = error_result(message, errc::auth);
    } else if (status == 429) {
      attempt.result = error_result(message, errc::rate_limit);
      attempt.retryable = true;
    } else if (status >= 500) {
      attempt.result = error_result(message, errc::server);
      attempt.retryable = true;
    } else if (status == 400 && says_context_is_too_long(detail)) {
      attempt.result = error_result(message, errc::context_window_exceeded);
    } else {
      attempt.result = error_result(message, errc::http_status, "HTTP_" + std::to_string(status));
    }
    const auto retry_after = parser.get()[http::field::retry_after];
    if (!retry_after.empty()) {
      const long seconds = std::strtol(std::string(retry_after).c_str(), nullptr, 10);
      if (seconds > 0) attempt.retry_after = std::chrono::seconds(std::min(seconds, 30L));
    }
    co_return attempt;
  }

  SseParser sse(SseParser::Limits{config.max_sse_line_bytes, config.max_sse_event_bytes});
  openai::StreamDecoder decoder;
  std::vector<SseParser::Event> events;
  std::vector<protocol::Chunk> chunks;
  while (!parser.is_done()) {
    parser.get().body().data = chunk_buffer.data();
    parser.get().body().size = chunk_buffer.size();
    // After [DONE] only the end of the HTTP body is expected: wait briefly.
    lowest.expires_after(decoder.done() ? config.body_end_timeout : config.idle_timeout);
    co_await http::async_read_some(stream, connection.buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (cancel.cancelled()) co_return Attempt{ModelResult{FinishReason::cancelled}};
    if (ec) break;
    if (decoder.done()) continue;
    sse.feed(std::string_view(chunk_buffer.data(), chunk_buffer.size() - parser.get().body().size), events);
    try {
      for (const SseParser::Event& event : events) {
        if (!decoder.on_data(event.data, chunks)) break;
      }
    } catch (const std::exception& e) {
      co_return Attempt{error_result(e.what(), errc::bad_stream)};
    }
    events.clear();
    for (protocol::Chunk& chunk : chunks) co_await sink.on_chunk(std::move(chunk));
    chunks.clear();
    // The next read may wait on the model: what arrived goes out first.
    co_await sink.flush();
    if (cancel.cancelled()) co_return Attempt{ModelResult{FinishReason::cancelled}};
    // Not retried: an endpoint that sent this once will likely send it again.
    if (sse.error() != SseParser::Error::none) co_return Attempt{too_large_result(sse.error_message())};
  }
  lowest.expires_never();
  if (ec == http::error::buffer_overflow) {
    co_return Attempt{too_large_result("the model stream sent an HTTP framing line longer than " +
                                       std::to_string(config.max_http_buffer_bytes) + " bytes")};
  }
  if (!decoder.done()) {
    const bool timed_out = ec == beast::error::timeout;
    attempt.result = error_result(timed_out ? "the model stream went silent past the idle timeout"
                                            : "the model stream closed before [DONE]",
                                  timed_out ? errc::timeout : errc::stream_closed);
    // Nothing reached the client yet: safe to try again.
    attempt.retryable = !decoder.received_any();
    co_return attempt;
  }
  attempt.reusable = !ec && parser.is_done() && parser.get().keep_alive();
  decoder.finish(chunks);
  for (protocol::Chunk& chunk : chunks) co_await sink.on_chunk(std::move(chunk));
  const std::string reason = decoder.finish_reason().value_or("stop");
  if (const auto mapped = openai::map_finish_reason(reason)) {
    attempt.result = ModelResult{*mapped};
  } else {
    attempt.result = error_result("the model stopped with finish_reason \"" + reason + "\"", errc::finish_reason,
                                  "FINISH_" + upper(reason));
  }
  co_return attempt;
}

asio::awaitable<bool> backoff(std::chrono::milliseconds delay, CancelScope& cancel) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  CancelScope::Hook hook(cancel, [&timer] { timer.cancel(); });
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return !cancel.cancelled();
}

}  // namespace

asio::awaitable<ModelResult> DeepSeekProvider::stream(const ModelRequest& request, ChunkSink& sink,
                                                      CancelScope& cancel) {
  ModelRequest effective = request;
  if (effective.model.empty()) effective.model = config_.default_model;
  const std::string body = json::serialize(openai::build_request_body(effective));
  // Connecting and the model's first byte are waits: what the turn holds goes out first.
  co_await sink.flush();

  ModelResult last;
  for (int attempt_number = 1; attempt_number <= config_.max_attempts; ++attempt_number) {
    if (cancel.cancelled()) co_return ModelResult{FinishReason::cancelled};
    std::unique_ptr<HttpConnection> connection = impl_->take_idle();
    const bool reused = connection != nullptr;
    if (!connection) {
      std::string error;
      connection = co_await open_connection(impl_->executor, impl_->tls, impl_->url, config_.connect_timeout,
                                            cancel, error);
      if (cancel.cancelled()) co_return ModelResult{FinishReason::cancelled};
      if (!connection) {
        last = error_result(error, errc::connect);
        spdlog::warn("deepseek: {} (attempt {}/{})", error, attempt_number, config_.max_attempts);
        if (attempt_number < config_.max_attempts) {
          const bool waited = co_await backoff(config_.retry_base_delay * (1 << (attempt_number - 1)), cancel);
          if (!waited) co_return ModelResult{FinishReason::cancelled};
        }
        continue;
      }
    }

    Attempt attempt;
    if (auto* plain = std::get_if<PlainStream>(&connection->stream)) {
      attempt = co_await exchange(*plain, *connection, impl_->url, config_, body, sink, cancel);
    } else {
      attempt = co_await exchange(std::get<TlsStream>(connection->stream), *connection, impl_->url, config_,
                                  body, sink, cancel);
    }
    if (attempt.reusable) impl_->give_back(std::move(connection), config_.max_idle_connections);
    if (!attempt.retryable) co_return attempt.result;
    last = attempt.result;
    if (reused && (last.error == errc::stream_closed || last.error == errc::connection)) {
      // A pooled connection the server had already closed: not the model's fault.
      --attempt_number;
      continue;
    }
    spdlog::warn("deepseek: {} (attempt {}/{})", last.error_message, attempt_number, config_.max_attempts);
    if (attempt_number < config_.max_attempts) {
      auto delay = config_.retry_base_delay * (1 << (attempt_number - 1));
      if (attempt.retry_after > delay) delay = attempt.retry_after;
      const bool waited = co_await backoff(delay, cancel);
      if (!waited) co_return ModelResult{FinishReason::cancelled};
    }
  }
  co_return last;
}

}  // namespace harnessd::llm
