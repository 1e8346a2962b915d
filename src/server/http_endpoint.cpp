// HTTP and WebSocket on one port: plain requests get /healthz, /metrics or
// the embedded web UI; an Upgrade request passes the Origin and token checks
// and becomes a WebSocket connection served like any other.
#include "server/http_endpoint.hpp"

#include "../transport/detail/websocket_transport.hpp"
#include "harness/session_registry.hpp"
#include "server/connection.hpp"
#include "server/metrics.hpp"
#include "server/server.hpp"
#include "server/web_assets.hpp"
#include "util/version.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <spdlog/spdlog.h>

namespace harnessd::server {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

namespace {

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

/// Value of `name` in the query string of `target`, undecoded ("" if absent).
std::string query_param(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

/// %XX and '+' decoding of a query parameter value.
std::string url_decode(std::string_view in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%' && i + 2 < in.size() && std::isxdigit(static_cast<unsigned char>(in[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(in.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

/// The page may load only its own files and talk only to this port; no site
/// may frame it, sniff its types or learn its address from a Referer.
void set_security_headers(Response& res, const Request& req) {
  std::string_view host = req[http::field::host];
  const bool plain = std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
  });
  // Older browsers do not count ws: as 'self': name this port explicitly.
  const std::string sockets = plain && !host.empty() ? fmt::format(" ws://{0} wss://{0}", host) : std::string();
  res.set("Content-Security-Policy",
          fmt::format("default-src 'self'; connect-src 'self'{}; img-src 'self' data:; object-src 'none'; "
                      "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
                      sockets));
  res.set(http::field::x_frame_options, "DENY");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
}

Response make_response(const Request& req, http::status status, std::string_view type, std::string body) {
  Response res{status, req.version()};
  res.set(http::field::server, "harnessd");
  res.set(http::field::content_type, type);
  res.set(http::field::cache_control, "no-store");
  set_security_headers(res, req);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response text_response(const Request& req, http::status status, std::string_view message) {
  return make_response(req, status, "text/plain; charset=utf-8", std::string(message) + "\n");
}

Response route(const Request& req, Server& server) {
  if (req.method() != http::verb::get && req.method() != http::verb::head) {
    Response res = text_response(req, http::status::method_not_allowed, "method not allowed");
    res.set(http::field::allow, "GET, HEAD");
    return res;
  }
  ServerContext& ctx = server.context();
  const std::string_view path = path_of(req.target());
  if (path == "/healthz") {
    const bool draining = ctx.draining.load(std::memory_order_acquire);
    // A node without its database serves nobody well: 503 sends clients elsewhere.
    const std::string database = ctx.sessions.store().database_status();
    const bool database_down = !database.empty() && database != "ok";
    json::object health{{"status", draining ? "draining" : database_down ? "degraded" : "ok"},
                        {"version", util::version},
                        {"uptimeSeconds", static_cast<std::int64_t>(ctx.metrics.uptime_seconds())},
                        {"connections", ctx.metrics.open_connections()},
                        {"sessions", ctx.sessions.size()},
                        {"runningTurns", ctx.sessions.stats().active.load()}};
    if (!database.empty()) health["database"] = database;
    // 503 while draining: load balancers and readiness probes send no new
    // clients, while running turns finish.
    return make_response(req, draining || database_down ? http::status::service_unavailable : http::status::ok,
                         "application/json", json::serialize(health));
  }
  if (path == "/metrics") {
    return make_response(req, http::status::ok, "text/plain; version=0.0.4; charset=utf-8",
                         ctx.metrics.render_prometheus(ctx.sessions));
  }
  const std::string_view asset_path = path == "/" ? std::string_view("/index.html") : path;
  for (const WebAsset& asset : web_assets()) {
    if (asset.path == asset_path) {
      return make_response(req, http::status::ok, asset.content_type, std::string(asset.body));
    }
  }
  return text_response(req, http::status::not_found, "not found");
}

/// Lower-case ASCII, for host names.
std::string lower(std::string_view in) {
  std::string out(in);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// Whether `host` (a Host header) names this daemon: a loopback name or the
/// address the client connected to, with the port it connected to, or a
/// name from --allow-host with any port. A DNS name that an attacker
/// rebinds to 127.0.0.1 is none of these, so its pages cannot reach us.
bool host_allowed(std::string_view host_header, const asio::ip::tcp::endpoint& local, bool secure,
                  const std::vector<std::string>& allowed_hosts) {
  const std::string host = lower(host_header);
  if (host.empty()) return false;
  std::string name = host;
  std::string port;
  // "[v6]:port", "[v6]", "name:port" or "name".
  if (host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string::npos) return false;
    name = host.substr(0, close + 1);
    if (close + 1 < host.size()) {
      if (host[close + 1] != ':') return false;
      port = host.substr(close + 2);
    }
  } else if (const std::size_t colon = host.rfind(':'); colon != std::string::npos) {
    name = host.substr(0, colon);
    port = host.substr(colon + 1);
  }
  if (!std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  for (const std::string& allowed : allowed_hosts) {
    if (name == lower(allowed)) return true;
  }
  const std::string local_port = std::to_string(local.port());
  const bool default_port = (secure && local.port() == 443) || (!secure && local.port() == 80);
  if (port != local_port && !(port.empty() && default_port)) return false;
  asio::ip::address address = local.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  const std::string local_name = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return name == "localhost" || name == "127.0.0.1" || name == "[::1]" || name == local_name;
}

/// Why an upgrade is refused, or nullopt when it is allowed.
std::optional<Response> check_upgrade(const Request& req, const ServerContext& context, const std::string& peer,
                                      bool secure, const auth::Principal*& principal) {
  const ServerConfig& config = context.config;
  if (context.draining.load(std::memory_order_acquire)) {
    return text_response(req, http::status::service_unavailable, "shutting down");
  }
  const auto origin = req.find(http::field::origin);
  if (origin != req.end()) {
    const std::string_view value = origin->value();
    const std::string_view host = req[http::field::host];
    // Same origin: the page came from this very port (https for wss).
    bool allowed = value == fmt::format("{}://{}", secure ? "https" : "http", host);
    for (const std::string& allowed_origin : config.allowed_origins) allowed = allowed || value == allowed_origin;
    if (!allowed) {
      spdlog::warn("{}: websocket refused: origin {} not allowed", peer, value);
      return text_response(req, http::status::forbidden,
                           fmt::format("origin {} is not allowed (start harnessd with --allow-origin {})", value, value));
    }
  }
  if (!config.credentials.required()) {
    principal = &auth::Credentials::anonymous();
    return std::nullopt;
  }
  std::string token = url_decode(query_param(req.target(), "access_token"));
  const std::string_view authorization = req[http::field::authorization];
  if (authorization.starts_with("Bearer ")) token = std::string(authorization.substr(7));
  principal = config.credentials.authenticate(token);
  if (principal == nullptr) {
    spdlog::warn("{}: websocket refused: {} bearer token", peer, token.empty() ? "missing" : "wrong");
    Response res = text_response(req, http::status::unauthorized,
                                 token.empty() ? "missing bearer token" : "wrong bearer token");
    res.set(http::field::www_authenticate, "Bearer");
    return res;
  }
  spdlog::info("{}: websocket authenticated as {}", peer, principal->name);
  return std::nullopt;
}

asio::awaitable<void> serve(transport::detail::CorkedStream stream, Server& server, std::string peer,
                            std::shared_ptr<void> slot) {
  // A daemon that stops closes idle keep-alive connections at once. The
  // close runs on this connection's strand and only while this frame lives.
  auto alive = std::make_shared<bool>(true);
  struct Tracked {
    Server& server;
    std::uint64_t key;
    ~Tracked() { server.untrack_http(key); }
  } tracked{server, server.track_http([weak = std::weak_ptr<bool>(alive), executor = stream.get_executor(),
                                       socket = &stream.lowest().socket()] {
    asio::post(executor, [weak, socket] {
      if (weak.lock()) {
        boost::system::error_code ignored;
        socket->close(ignored);
      }
    });
  })};
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(server.context().config.max_http_body_bytes);
    stream.lowest().expires_after(server.context().config.http_read_timeout);
    boost::system::error_code ec;
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec != http::error::end_of_stream && ec != beast::error::timeout) {
        spdlog::debug("{}: http read failed: {}", peer, ec.message());
      }
      co_return;
    }
    Request req = parser.release();

    boost::system::error_code local_ec;
    const asio::ip::tcp::endpoint local = stream.lowest().socket().local_endpoint(local_ec);
    if (local_ec || !host_allowed(req[http::field::host], local, stream.secure(),
                                  server.context().config.allowed_hosts)) {
      // Every path, upgrades included: a rebound DNS name gets nothing.
      spdlog::warn("{}: refused Host \"{}\" (start harnessd with --allow-host NAME to serve that name)", peer,
                   std::string(req[http::field::host]).substr(0, 256));
      Response refusal = text_response(req, http::status::misdirected_request,
                                       "this host name is not served here (harnessd --allow-host NAME)");
      refusal.keep_alive(false);
      co_await http::async_write(stream, refusal, asio::redirect_error(asio::use_awaitable, ec));
      stream.lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
      co_return;
    }

    if (beast::websocket::is_upgrade(req)) {
      const auth::Principal* principal = nullptr;
      if (std::optional<Response> refusal =
              check_upgrade(req, server.context(), peer, stream.secure(), principal)) {
        refusal->keep_alive(false);
        co_await http::async_write(stream, *refusal, asio::redirect_error(asio::use_awaitable, ec));
        stream.lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
        co_return;
      }
      const ServerConfig& config = server.context().config;
      transport::WebSocketOptions options{config.max_frame_bytes,    config.ws_idle_timeout,
                                          config.ws_deflate,         config.ws_deflate_threshold,
                                          config.ws_handshake_timeout, config.ws_close_timeout};
      auto strand = Connection::Strand(stream.get_executor());
      const std::string scheme = stream.secure() ? "wss:" : "ws:";
      auto ws = std::make_unique<transport::WebSocketTransport>(std::move(stream), options, scheme + peer);
      if (!co_await ws->accept(req)) co_return;
      // Authenticated by the upgrade checks above.
      server.launch(std::make_shared<Connection>(strand, std::move(ws), server.context(), principal, std::move(slot)));
      co_return;
    }

    Response res = route(req, server);
    if (req.method() == http::verb::head) {
      http::response<http::empty_body> head{res.result(), res.version()};
      head.base() = res.base();
      co_await http::async_write(stream, head, asio::redirect_error(asio::use_awaitable, ec));
    } else {
      co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
    }
    if (ec || !res.keep_alive()) {
      stream.lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
      co_return;
    }
  }
}

/// wss://: the TLS handshake, within the WebSocket handshake timeout, then
/// the same HTTP and WebSocket service as ws://.
asio::awaitable<void> serve_tls(beast::tcp_stream tcp, std::shared_ptr<asio::ssl::context> tls, Server& server,
                                std::string peer, std::shared_ptr<void> slot) {
  beast::ssl_stream<beast::tcp_stream> stream(std::move(tcp), *tls);
  beast::get_lowest_layer(stream).expires_after(server.context().config.ws_handshake_timeout);
  boost::system::error_code ec;
  co_await stream.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    // A plain-text client on a TLS port, an untrusted certificate, a scan.
    spdlog::info("wss:{}: TLS handshake failed: {}", peer, ec.message());
    beast::get_lowest_layer(stream).close();
    co_return;
  }
  transport::detail::CorkedStream corked(std::move(stream));  // named: no temporary crosses the co_await
  co_await serve(std::move(corked), server, std::move(peer), std::move(slot));
}

}  // namespace

void serve_http_or_websocket(asio::ip::tcp::socket socket, Server& server,
                             std::shared_ptr<asio::ssl::context> tls, std::shared_ptr<void> slot) {
  boost::system::error_code ec;
  // Frames are written whole and at once; Nagle would hold back the tail of
  // a batch until the peer's delayed ACK.
  socket.set_option(asio::ip::tcp::no_delay(true), ec);
  auto endpoint = socket.remote_endpoint(ec);
  std::string peer = ec ? "?" : endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  auto executor = socket.get_executor();
  const auto on_end = [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::warn("http connection failed: {}", ex.what());
    }
  };
  if (tls) {
    asio::co_spawn(executor,
                   serve_tls(beast::tcp_stream(std::move(socket)), std::move(tls), server, std::move(peer),
                             std::move(slot)),
                   on_end);
  } else {
    asio::co_spawn(executor,
                   serve(transport::detail::CorkedStream(beast::tcp_stream(std::move(socket))), server, std::move(peer),
                         std::move(slot)),
                   on_end);
  }
}

}  // namespace harnessd::server
