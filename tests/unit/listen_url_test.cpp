#include "harnessd/util/listen_url.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

using namespace harnessd::util;

TEST_CASE("listen URLs parse, including IPv6 and port 0") {
  ListenUrl tcp = parse_listen_url("tcp://127.0.0.1:7879");
  CHECK(tcp.scheme == "tcp");
  CHECK(tcp.host == "127.0.0.1");
  CHECK(tcp.port == 7879);
  ListenUrl v6 = parse_listen_url("ws://[::1]:0");
  CHECK(v6.host == "::1");
  CHECK(v6.port == 0);
  CHECK(parse_listen_url("ws://localhost:80/").host == "127.0.0.1");
  CHECK(format_listen_url("ws", "::1", 8) == "ws://[::1]:8");
}

TEST_CASE("bad listen URLs are refused with a message") {
  for (const char* bad : {"127.0.0.1:80", "http://127.0.0.1:80", "tcp://127.0.0.1", "tcp://:80",
                          "tcp://127.0.0.1:65536", "tcp://127.0.0.1:x", "ws://[::1]80"}) {
    CHECK_THROWS_AS(parse_listen_url(bad), std::invalid_argument);
  }
}
