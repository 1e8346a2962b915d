#include "llm/deepseek_provider.hpp"
#include "harnessd/util/url.hpp"

#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include <array>
#include <stdexcept>
#include <string>

using namespace harnessd::util;

namespace {

constexpr std::array<std::string_view, 2> http_schemes{"https", "http"};
constexpr UrlRules http_rules{.schemes = http_schemes, .default_port = true, .path = true};

std::string deepseek_refusal(std::string base_url) {
  boost::asio::io_context io;
  harnessd::llm::DeepSeekConfig config;
  config.base_url = std::move(base_url);
  try {
    harnessd::llm::DeepSeekProvider provider(io.get_executor(), config);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("url: parts, defaults and printing") {
  ParsedUrl https = parse_url("https://api.deepseek.com", http_rules);
  REQUIRE(https.url);
  CHECK(https.url->scheme == "https");
  CHECK(https.url->host == "api.deepseek.com");
  CHECK(https.url->port == 443);
  CHECK(https.url->path.empty());
  CHECK(https.url->target() == "/");
  CHECK(https.url->to_string() == "https://api.deepseek.com:443");

  ParsedUrl local = parse_url("HTTP://[::1]:8080/v1/", http_rules);
  REQUIRE(local.url);
  CHECK(local.url->scheme == "http");
  CHECK(local.url->host == "::1");
  CHECK(local.url->port == 8080);
  CHECK(local.url->path == "/v1/");
  CHECK(local.url->host_port() == "[::1]:8080");

  CHECK(parse_url("http://h/", http_rules).url->port == 80);
  CHECK(parse_url("http://h:/", http_rules).url->port == 80);  // an empty port is the default (RFC 3986)

  constexpr std::array<std::string_view, 1> ws{"ws"};
  ParsedUrl query = parse_url("ws://h:1/rpc?access_token=a%20b", {.schemes = ws, .path = true, .query = true});
  REQUIRE(query.url);
  CHECK(query.url->target() == "/rpc?access_token=a%20b");
  CHECK(query.url->to_string() == "ws://h:1/rpc?access_token=a%20b");
  CHECK(url_forms({.schemes = http_schemes}) == "https://HOST:PORT or http://HOST:PORT");
}

TEST_CASE("url: refusals say why") {
  auto refused = [](std::string_view text, const UrlRules& rules) {
    ParsedUrl parsed = parse_url(text, rules);
    CHECK_FALSE(parsed.url);
    return parsed.error;
  };
  CHECK(refused("api.deepseek.com", http_rules).kind == UrlError::Kind::not_url);
  CHECK(refused("ftp://h", http_rules).kind == UrlError::Kind::scheme);
  CHECK(refused("ftp://h", http_rules).reason == "scheme must be https or http");
  CHECK(refused("https://", http_rules).kind == UrlError::Kind::no_host);
  CHECK(refused("https:///v1", http_rules).kind == UrlError::Kind::no_host);
  CHECK(refused("https://h:0", http_rules).reason == "port must be 1..65535");
  CHECK(refused("https://h/v1?x=1", http_rules).reason == "a https:// URL has no query");
  CHECK(refused("https://h/v1#top", http_rules).reason == "a #fragment has no place here");
  CHECK(refused("https://user:pw@h/", http_rules).reason == "a user name or password has no place here");
  CHECK(refused("https://h/a b", http_rules).reason == "bad character in the path or query");
  CHECK(refused("https://a b/", http_rules).reason == "bad host");
  CHECK(refused("https://[v1.x]/", http_rules).reason == "bad IPv6 form, use [ADDR]:PORT");
  constexpr std::array<std::string_view, 1> tcp{"tcp"};
  CHECK(refused("tcp://h", {.schemes = tcp, .default_port = true}).reason == "missing :PORT");  // tcp has none
}

TEST_CASE("url: the model endpoint's base URL") {
  CHECK(deepseek_refusal("https://api.deepseek.com") == "accepted");
  CHECK(deepseek_refusal("http://127.0.0.1:9/v1/") == "accepted");
  CHECK(deepseek_refusal("http://[::1]:8080") == "accepted");
  CHECK(deepseek_refusal("api.deepseek.com") == "DEEPSEEK_BASE_URL must start with https:// or http://");
  CHECK(deepseek_refusal("ftp://api.deepseek.com") == "DEEPSEEK_BASE_URL must start with https:// or http://");
  CHECK(deepseek_refusal("https://") == "DEEPSEEK_BASE_URL has no host");
  CHECK(deepseek_refusal("http://h:x") == "DEEPSEEK_BASE_URL \"http://h:x\": port must be 1..65535");
  CHECK(deepseek_refusal("https://h/v1?k=1") == "DEEPSEEK_BASE_URL \"https://h/v1?k=1\": a https:// URL has no query");
}
