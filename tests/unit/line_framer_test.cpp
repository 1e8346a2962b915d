#include "harnessd/rpc/line_framer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using harnessd::rpc::LineFramer;
using Kind = LineFramer::Kind;

namespace {
/// Drains every complete result; "!" stands for an oversized frame.
std::vector<std::string> drain(LineFramer& framer) {
  std::vector<std::string> out;
  for (;;) {
    LineFramer::Next next = framer.next();
    if (next.kind == Kind::need_more) return out;
    out.push_back(next.kind == Kind::frame ? std::string(next.frame) : "!");
  }
}
}  // namespace

TEST_CASE("lines split on newline; CRLF accepted; blank lines skipped") {
  LineFramer framer(1024);
  framer.feed("{\"a\":1}\r\n\n   \r\n{\"b\":2}\n{\"c\"");
  CHECK(drain(framer) == std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"});
  framer.feed(":3}\n");
  CHECK(drain(framer) == std::vector<std::string>{"{\"c\":3}"});
}

TEST_CASE("a multibyte UTF-8 character split across reads arrives whole") {
  const std::string line = "{\"t\":\"\xE4\xBD\xA0\xE5\xA5\xBD\"}";  // 你好
  for (std::size_t cut = 1; cut < line.size(); ++cut) {
    LineFramer framer(1024);
    framer.feed(line.substr(0, cut));
    CHECK(drain(framer).empty());
    framer.feed(line.substr(cut) + "\n");
    CHECK(drain(framer) == std::vector<std::string>{line});
  }
}

TEST_CASE("byte-at-a-time input yields the same frames") {
  const std::string input = "{\"x\":1}\r\n{\"y\":2}\n\n{\"z\":3}\n";
  LineFramer framer(64);
  std::vector<std::string> frames;
  for (char c : input) {
    framer.feed(std::string_view(&c, 1));
    for (auto& f : drain(framer)) frames.push_back(f);
  }
  CHECK(frames == std::vector<std::string>{"{\"x\":1}", "{\"y\":2}", "{\"z\":3}"});
}

TEST_CASE("an oversized line is reported once and discarded up to the next newline") {
  LineFramer framer(16);
  framer.feed(std::string(40, 'x'));
  CHECK(drain(framer) == std::vector<std::string>{"!"});
  framer.feed(std::string(1000, 'y'));
  CHECK(drain(framer).empty());
  CHECK(framer.pending_bytes() == 0);  // nothing of the oversized line is kept
  framer.feed("zzz\n{\"ok\":true}\n");
  CHECK(drain(framer) == std::vector<std::string>{"{\"ok\":true}"});
}

TEST_CASE("a complete line over the limit in one read is refused, the next one served") {
  LineFramer framer(8);
  framer.feed("0123456789\n{\"a\":1}\n");
  CHECK(drain(framer) == std::vector<std::string>{"!", "{\"a\":1}"});
}

TEST_CASE("a line of exactly the limit is accepted") {
  LineFramer framer(8);
  framer.feed("12345678\r\n");
  CHECK(drain(framer) == std::vector<std::string>{"12345678"});
}

TEST_CASE("the buffer is reused: many lines do not grow memory") {
  LineFramer framer(1024);
  for (int i = 0; i < 10000; ++i) {
    framer.feed("{\"i\":1}\n");
    CHECK(drain(framer).size() == 1);
  }
  CHECK(framer.pending_bytes() == 0);
}
