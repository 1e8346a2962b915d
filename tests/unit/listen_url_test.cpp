#include "util/listen_url.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

using namespace harnessd::util;

namespace {
std::string refusal(std::string_view url) {
  try {
    parse_listen_url(url);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}
}  // namespace

TEST_CASE("listen URLs parse, including IPv6 and port 0") {
  ListenUrl tcp = parse_listen_url("tcp://127.0.0.1:7879");
  CHECK(tcp.scheme == "tcp");
  CHECK(tcp.host == "127.0.0.1");
  CHECK(tcp.port == 7879);
  ListenUrl v6 = parse_listen_url("ws://[::1]:0");
  CHECK(v6.host == "::1");
  CHECK(v6.port == 0);
  ListenUrl tcp6 = parse_listen_url("tcp://[::1]:4000");
  CHECK(tcp6.scheme == "tcp");
  CHECK(tcp6.host == "::1");
  CHECK(tcp6.port == 4000);
  CHECK(parse_listen_url("ws://localhost:80/").host == "127.0.0.1");
  CHECK(parse_listen_url("tcp://0.0.0.0:0080").port == 80);
  CHECK(parse_listen_url("TCP://h:1").scheme == "tcp");
  CHECK(format_listen_url("ws", "::1", 8) == "ws://[::1]:8");
  CHECK(format_listen_url("tcp", "127.0.0.1", 0) == "tcp://127.0.0.1:0");
}

TEST_CASE("bad listen URLs are refused with a message") {
  for (const char* bad : {"127.0.0.1:80", "http://127.0.0.1:80", "tcp://127.0.0.1", "tcp://:80",
                          "tcp://127.0.0.1:65536", "tcp://127.0.0.1:x", "ws://[::1]80"}) {
    CHECK_THROWS_AS(parse_listen_url(bad), std::invalid_argument);
  }
  CHECK(refusal("127.0.0.1:80") ==
        "listen address \"127.0.0.1:80\" must look like tcp://HOST:PORT or ws://HOST:PORT or tls://HOST:PORT or "
        "wss://HOST:PORT");
  CHECK(refusal("http://127.0.0.1:80") == "listen address \"http://127.0.0.1:80\": scheme must be tcp or ws or tls or wss");
  CHECK(refusal("tcp://127.0.0.1") == "listen address \"tcp://127.0.0.1\": missing :PORT");
  CHECK(refusal("tcp://:80") == "listen address \"tcp://:80\": missing host");
  CHECK(refusal("tcp://127.0.0.1:65536") == "listen address \"tcp://127.0.0.1:65536\": port must be 0..65535");
  CHECK(refusal("tcp://127.0.0.1:x") == "listen address \"tcp://127.0.0.1:x\": port must be 0..65535");
  CHECK(refusal("tcp://127.0.0.1:") == "listen address \"tcp://127.0.0.1:\": port must be 0..65535");
  CHECK(refusal("ws://[::1]80") == "listen address \"ws://[::1]80\": bad IPv6 form, use [ADDR]:PORT");
  CHECK(refusal("ws://[::1:80") == "listen address \"ws://[::1:80\": bad IPv6 form, use [ADDR]:PORT");
  CHECK(refusal("tcp://h:1/x") == "listen address \"tcp://h:1/x\": a tcp:// URL has no path");
  CHECK(refusal("ws://h:1?x") == "listen address \"ws://h:1?x\": a ws:// URL has no query");
  // Boost.URL 1.81 alone would read these as "h:1" and a path.
  CHECK(refusal("tcp://h:1:2") == "listen address \"tcp://h:1:2\": bad host");
  CHECK(refusal("tcp://h:1x") == "listen address \"tcp://h:1x\": port must be 0..65535");
}
