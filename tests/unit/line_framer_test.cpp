#include "transport/line_framer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using harnessd::transport::LineFramer;
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

TEST_CASE("the limit counts content only: CRLF in one read or split across reads") {
  const std::string exact(8, 'a');
  const std::string over(9, 'b');
  SUBCASE("exactly the limit, CR and LF in one read") {
    LineFramer framer(8);
    framer.feed(exact + "\r\n");
    CHECK(drain(framer) == std::vector<std::string>{exact});
  }
  SUBCASE("exactly the limit, the read ends between CR and LF") {
    LineFramer framer(8);
    framer.feed(exact + "\r");
    CHECK(drain(framer).empty());
    framer.feed("\n{\"n\":1}\n");
    CHECK(drain(framer) == std::vector<std::string>{exact, "{\"n\":1}"});
  }
  SUBCASE("exactly the limit, the read ends before the CR") {
    LineFramer framer(8);
    framer.feed(exact);
    CHECK(drain(framer).empty());
    framer.feed("\r");
    CHECK(drain(framer).empty());
    framer.feed("\n");
    CHECK(drain(framer) == std::vector<std::string>{exact});
  }
  SUBCASE("limit + 1, CR and LF in one read") {
    LineFramer framer(8);
    framer.feed(over + "\r\n{\"n\":2}\n");
    CHECK(drain(framer) == std::vector<std::string>{"!", "{\"n\":2}"});
  }
  SUBCASE("limit + 1, the read ends between CR and LF") {
    LineFramer framer(8);
    framer.feed(over + "\r");
    CHECK(drain(framer) == std::vector<std::string>{"!"});
    framer.feed("\n{\"n\":3}\n");
    CHECK(drain(framer) == std::vector<std::string>{"{\"n\":3}"});
  }
  SUBCASE("a CR inside the line is content") {
    LineFramer framer(8);
    framer.feed(exact + "\r");
    CHECK(drain(framer).empty());
    framer.feed("x");
    CHECK(drain(framer) == std::vector<std::string>{"!"});
    framer.feed("\r\n{\"n\":4}\n");
    CHECK(drain(framer) == std::vector<std::string>{"{\"n\":4}"});
  }
}

TEST_CASE("every split of limit-sized and limit+1 lines gives the same answer") {
  for (const std::size_t size : {std::size_t{8}, std::size_t{9}}) {
    const std::string input = std::string(size, 'q') + "\r\n{\"k\":1}\r\n";
    const std::vector<std::string> expected{size == 8 ? std::string(8, 'q') : "!", "{\"k\":1}"};
    for (std::size_t cut = 0; cut <= input.size(); ++cut) {
      LineFramer framer(8);
      framer.feed(input.substr(0, cut));
      std::vector<std::string> got = drain(framer);
      framer.feed(input.substr(cut));
      for (auto& f : drain(framer)) got.push_back(f);
      CHECK_MESSAGE(got == expected, "size " << size << " cut at " << cut);
    }
  }
}

TEST_CASE("an idle framer gives back the buffer a large frame needed") {
  LineFramer framer(4u << 20);
  const std::string big(2u << 20, 'x');
  framer.feed(big + "\n");
  CHECK(framer.capacity() >= big.size());
  auto frames = drain(framer);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].size() == big.size());
  // The next read with nothing pending: the large allocation goes away.
  auto space = framer.prepare(LineFramer::idle_capacity_bytes);
  CHECK(space.size() == LineFramer::idle_capacity_bytes);
  CHECK(framer.capacity() <= LineFramer::idle_capacity_bytes);
  framer.commit(0);
  framer.feed("{\"after\":1}\n");
  CHECK(drain(framer) == std::vector<std::string>{"{\"after\":1}"});
}

TEST_CASE("a small partial frame left behind a large one keeps a small buffer") {
  LineFramer framer(4u << 20);
  framer.feed(std::string(2u << 20, 'x') + "\n{\"part");
  CHECK(drain(framer).size() == 1);
  framer.prepare(64 * 1024);
  framer.commit(0);
  CHECK(framer.capacity() < 256 * 1024);
  framer.feed("\":2}\n");
  CHECK(drain(framer) == std::vector<std::string>{"{\"part\":2}"});
}

TEST_CASE("a frame growing over many reads is kept whole") {
  LineFramer framer(1u << 20);
  std::string expected;
  for (int i = 0; i < 40; ++i) {
    const std::string piece(10000, static_cast<char>('a' + i % 26));
    expected += piece;
    framer.feed(piece);
    CHECK(drain(framer).empty());
  }
  framer.feed("\n");
  CHECK(drain(framer) == std::vector<std::string>{expected});
}
