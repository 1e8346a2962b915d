// `web_fetch`: the model reads a web page. Off unless the daemon is started
// with --web-fetch on, because a fetch is a request from the daemon's own
// network position: every hop's name is resolved here, each address is
// checked (no loopback, private, link-local or metadata address unless
// --web-fetch-allow-private), and the connection goes to exactly the
// address that was checked, so a name that re-resolves elsewhere gains
// nothing.
#include "tools/builtin.hpp"
#include "tools/web_fetch.hpp"

#include "harnessd/util/url.hpp"
#include "llm/cancel_scope.hpp"
#include "util/utf8.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <variant>

namespace harnessd::tools {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr std::chrono::seconds fetch_timeout{30};
constexpr std::size_t max_body_bytes = 5 * 1024 * 1024;
constexpr int max_redirects = 5;
/// What the model reads of a page at most; the rest is cut with a note.
constexpr std::size_t max_text_bytes = 100 * 1024;

struct Response {
  unsigned status = 0;
  std::string location;
  std::string content_type;
  std::string body;
};

/// One GET over an open stream, read within the body limit.
template <class Stream>
asio::awaitable<std::optional<Response>> get(Stream& stream, const util::Url& url, std::string& error) {
  http::request<http::empty_body> request{http::verb::get, url.target(), 11};
  const bool default_port = (url.scheme == "http" && url.port == 80) || (url.scheme == "https" && url.port == 443);
  request.set(http::field::host, default_port ? url.host : url.host_port());
  request.set(http::field::user_agent, "harnessd web_fetch");
  request.set(http::field::accept, "text/html, text/plain, application/json, */*;q=0.5");
  request.keep_alive(false);
  boost::system::error_code ec;
  co_await http::async_write(stream, request, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    error = "sending the request failed: " + ec.message();
    co_return std::nullopt;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_body_bytes);
  parser.header_limit(64 * 1024);
  co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
  if (ec == http::error::body_limit) {
    error = "the response is larger than 5 MB";
    co_return std::nullopt;
  }
  if (ec) {
    error = "reading the response failed: " + ec.message();
    co_return std::nullopt;
  }
  http::response<http::string_body> response = parser.release();
  co_return Response{response.result_int(), std::string(response[http::field::location]),
                     std::string(response[http::field::content_type]), std::move(response.body())};
}

/// Where a redirect's Location points, against the URL that answered it.
std::string resolve_location(const util::Url& base, const std::string& location) {
  if (location.starts_with("http://") || location.starts_with("https://")) return location;
  const std::string origin = base.scheme + "://" + base.host_port();
  if (location.starts_with("//")) return base.scheme + ":" + location;
  if (location.starts_with("/")) return origin + location;
  std::string path = base.path.empty() ? "/" : base.path;
  path.resize(path.rfind('/') + 1);
  return origin + path + location;
}

class WebFetchTool final : public Tool {
 public:
  std::string_view name() const override { return "web_fetch"; }
  std::string_view description() const override {
    return "Fetch an http(s) URL and read it as text (HTML is reduced to its text). Use it for documentation "
           "or an issue page the user points to; at most 5 MB are fetched, 100 KB shown, 5 redirects "
           "followed. Addresses inside private networks are refused.";
  }
  const json::object& input_schema() const override {
    static const json::object schema{
        {"type", "object"},
        {"properties", json::object{{"url", json::object{{"type", "string"}, {"description", "http:// or https:// URL"}}}}},
        {"required", json::array{"url"}}};
    return schema;
  }
  bool read_only() const override { return false; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    const json::value& url_arg = args.at("url");
    if (!url_arg.is_string()) co_return ToolResult::failure("INVALID_ARGUMENTS", "web_fetch: \"url\" must be a string");
    std::string next(url_arg.get_string());
    for (int hop = 0; hop <= max_redirects; ++hop) {
      static constexpr std::array<std::string_view, 2> schemes{"http", "https"};
      const util::ParsedUrl parsed =
          util::parse_url(next, util::UrlRules{.schemes = schemes, .default_port = true, .path = true, .query = true});
      if (!parsed.url) {
        co_return ToolResult::failure("INVALID_URL", "web_fetch: " + util::valid_utf8(next) + " is not an http(s) URL (" +
                                                         parsed.error.reason + ")");
      }
      const util::Url url = *parsed.url;
      std::string error;
      std::string code = "FETCH_FAILED";
      std::optional<Response> response = co_await fetch(url, context, error, code);
      if (context.cancel.cancelled()) co_return ToolResult::failure("CANCELLED", "web_fetch: cancelled");
      if (!response) co_return ToolResult::failure(code, "web_fetch: " + util::valid_utf8(error));
      if (response->status >= 300 && response->status < 400 && !response->location.empty()) {
        next = resolve_location(url, response->location);
        continue;
      }
      if (response->status < 200 || response->status >= 300) {
        co_return ToolResult::failure("HTTP_ERROR", "web_fetch: " + url.to_string() + " answered HTTP " +
                                                        std::to_string(response->status));
      }
      ToolResult result;
      const bool html = response->content_type.find("html") != std::string::npos;
      std::string text = html ? html_to_text(response->body) : util::valid_utf8(response->body);
      const std::size_t full = text.size();
      if (full > max_text_bytes) {
        text = std::string(util::cut_utf8(text, max_text_bytes));
        text += "\n[cut at 100 KB of " + std::to_string(full) + " bytes of text]";
      }
      result.text = std::move(text);
      result.meta = json::object{{"url", url.to_string()},
                                 {"status", response->status},
                                 {"contentType", util::valid_utf8(response->content_type)},
                                 {"bytes", response->body.size()}};
      co_return result;
    }
    co_return ToolResult::failure("TOO_MANY_REDIRECTS", "web_fetch: more than 5 redirects");
  }

 private:
  /// Resolves, checks and connects to `url`, then GETs it; nullopt with
  /// `error` and `code` on failure.
  static asio::awaitable<std::optional<Response>> fetch(const util::Url& url, ToolContext& context, std::string& error,
                                                        std::string& code) {
    auto executor = co_await asio::this_coro::executor;
    tcp::resolver resolver(executor);
    boost::system::error_code ec;
    tcp::resolver::results_type found;
    {
      llm::CancelScope::Hook hook(context.cancel, [&resolver] { resolver.cancel(); });
      found = co_await resolver.async_resolve(url.host, std::to_string(url.port),
                                              asio::redirect_error(asio::use_awaitable, ec));
    }
    if (ec) {
      error = "cannot resolve " + url.host + ": " + ec.message();
      co_return std::nullopt;
    }
    std::vector<tcp::endpoint> allowed;
    std::string refused;
    for (const auto& entry : found) {
      const tcp::endpoint endpoint = entry.endpoint();
      if (context.sandbox_options.web_fetch_allow_private || is_public_address(endpoint.address())) {
        allowed.push_back(endpoint);
      } else {
        refused = endpoint.address().to_string();
      }
    }
    if (allowed.empty()) {
      code = "BLOCKED_ADDRESS";
      error = url.host + " resolves to " + refused +
              ", a loopback, private, link-local or metadata address (harnessd --web-fetch-allow-private)";
      co_return std::nullopt;
    }
    beast::tcp_stream lowest(executor);
    lowest.expires_after(fetch_timeout);
    llm::CancelScope::Hook hook(context.cancel, [&lowest] { lowest.close(); });
    // Exactly the checked addresses: a second resolution could answer otherwise.
    co_await lowest.async_connect(allowed, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      error = "cannot connect to " + url.host_port() + ": " + ec.message();
      co_return std::nullopt;
    }
    std::optional<Response> response;
    if (url.scheme == "http") {
      response = co_await get(lowest, url, error);
      co_return response;
    }
    ssl::context tls(ssl::context::tls_client);
    tls.set_default_verify_paths();
    tls.set_verify_mode(ssl::verify_peer);
    beast::ssl_stream<beast::tcp_stream> stream(std::move(lowest), tls);
    llm::CancelScope::Hook tls_hook(context.cancel,
                                    [&stream] { beast::get_lowest_layer(stream).close(); });
    if (!SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str())) {
      error = "cannot set the TLS server name";
      co_return std::nullopt;
    }
    stream.set_verify_callback(ssl::host_name_verification(url.host));
    co_await stream.async_handshake(ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      error = "TLS handshake with " + url.host + " failed: " + ec.message();
      co_return std::nullopt;
    }
    response = co_await get(stream, url, error);
    co_return response;
  }
};

}  // namespace

std::unique_ptr<Tool> make_web_fetch_tool() { return std::make_unique<WebFetchTool>(); }

}  // namespace harnessd::tools
