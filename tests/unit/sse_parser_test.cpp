// SSE parsing: events survive any split of the byte stream, and lines and
// events beyond their limits end the stream instead of growing memory.
#include "llm/sse_parser.hpp"

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

using harnessd::llm::SseParser;
using namespace std::string_view_literals;

namespace {
std::vector<SseParser::Event> parse_in_pieces(const std::string& stream, std::size_t cut) {
  SseParser parser;
  std::vector<SseParser::Event> events;
  parser.feed(std::string_view(stream).substr(0, cut), events);
  parser.feed(std::string_view(stream).substr(cut), events);
  return events;
}
}  // namespace

TEST_CASE("events split at every byte boundary decode the same") {
  const std::string stream =
      ": keep-alive\n\n"
      "data: {\"a\":\"\xE4\xBD\xA0\"}\n\n"
      "event: message\r\ndata: line1\r\ndata: line2\r\n\r\n"
      "data:nospace\r\r"
      "data: [DONE]\n\n";
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    const auto events = parse_in_pieces(stream, cut);
    REQUIRE_MESSAGE(events.size() == 4, "cut at " << cut);
    CHECK(events[0].data == "{\"a\":\"\xE4\xBD\xA0\"}");
    CHECK(events[1].event == "message");
    CHECK(events[1].data == "line1\nline2");
    CHECK(events[2].data == "nospace");
    CHECK(events[3].data == "[DONE]");
  }
}

TEST_CASE("byte-at-a-time feeding yields the same events") {
  const std::string stream = "data: x\n\ndata: y\r\n\r\n";
  SseParser parser;
  std::vector<SseParser::Event> events;
  for (char c : stream) parser.feed(std::string_view(&c, 1), events);
  REQUIRE(events.size() == 2);
  CHECK(events[1].data == "y");
}

TEST_CASE("comments and blank lines alone dispatch nothing; an unfinished event waits") {
  SseParser parser;
  std::vector<SseParser::Event> events;
  parser.feed(": ping\n\n\n: ping\n\ndata: partial", events);
  CHECK(events.empty());
  parser.feed("\n\n", events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].data == "partial");
}

TEST_CASE("a line that never ends stops at the line limit, whatever the read sizes") {
  for (const std::size_t read : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, std::size_t{1} << 20}) {
    SseParser parser(SseParser::Limits{1024, 4096});
    std::vector<SseParser::Event> events;
    parser.feed("data: {\"ok\":1}\n\n", events);
    const std::string junk(read, 'x');
    parser.feed("data: ", events);
    std::size_t fed = 0;
    while (parser.error() == SseParser::Error::none && fed < 10 * 1024) {
      parser.feed(junk, events);
      fed += junk.size();
      CHECK(parser.buffered_bytes() <= 1024);
    }
    CHECK_MESSAGE(parser.error() == SseParser::Error::line_too_long, "read size " << read);
    CHECK(parser.buffered_bytes() == 0);  // released at once
    CHECK(parser.error_message().find("1024") != std::string::npos);
    parser.feed("\n\ndata: later\n\n", events);  // ignored after the error
    REQUIRE(events.size() == 1);
    CHECK(events[0].data == "{\"ok\":1}");
  }
}

TEST_CASE("a line of exactly the limit is accepted; one byte more is refused") {
  const std::string exact = "data: " + std::string(1024 - 6, 'y');
  for (const char* terminator : {"\n", "\r\n", "\r"}) {
    SseParser parser(SseParser::Limits{1024, 4096});
    std::vector<SseParser::Event> events;
    parser.feed(exact, events);
    parser.feed(terminator, events);  // ends the line
    parser.feed(terminator, events);  // the blank line dispatches the event
    CHECK(parser.error() == SseParser::Error::none);
    REQUIRE(events.size() == 1);
    CHECK(events[0].data.size() == 1024 - 6);
  }
  SseParser parser(SseParser::Limits{1024, 4096});
  std::vector<SseParser::Event> events;
  parser.feed(exact + "y\n\n", events);
  CHECK(parser.error() == SseParser::Error::line_too_long);
  CHECK(events.empty());
}

TEST_CASE("many short data lines stop at the event limit") {
  SseParser parser(SseParser::Limits{1024, 4096});
  std::vector<SseParser::Event> events;
  const std::string line = "data: " + std::string(99, 'z') + "\n";  // 100 bytes joined with '\n'
  for (int i = 0; i < 40; ++i) parser.feed(line, events);            // 40 * 100 - 1 bytes: fits
  CHECK(parser.error() == SseParser::Error::none);
  parser.feed(line, events);
  CHECK(parser.error() == SseParser::Error::event_too_large);
  CHECK(parser.buffered_bytes() == 0);
  CHECK(events.empty());
  CHECK(parser.error_message().find("4096") != std::string::npos);
}

TEST_CASE("an event of exactly the limit is dispatched") {
  SseParser parser(SseParser::Limits{1024, 2000});
  std::vector<SseParser::Event> events;
  const std::string half(999, 'w');
  parser.feed("data: " + half + "\ndata: " + std::string(1000, 'v') + "\n\n", events);
  CHECK(parser.error() == SseParser::Error::none);
  REQUIRE(events.size() == 1);
  CHECK(events[0].data.size() == 2000);
}

TEST_CASE("the default limits are 1 MiB per line and 4 MiB per event") {
  SseParser parser;
  CHECK(parser.limits().max_line_bytes == 1024 * 1024);
  CHECK(parser.limits().max_event_bytes == 4 * 1024 * 1024);
  std::vector<SseParser::Event> events;
  parser.feed("data: " + std::string(3 * 1024 * 1024, 'h'), events);
  CHECK(parser.error() == SseParser::Error::line_too_long);
  CHECK(parser.buffered_bytes() == 0);
}

TEST_CASE("the last event ID and the retry time are kept for a reconnect, whether or not an event is dispatched") {
  SseParser parser;
  std::vector<SseParser::Event> events;
  CHECK(parser.last_event_id().empty());
  CHECK_FALSE(parser.retry_ms().has_value());
  // A priming event: an ID and a retry time, no data, nothing dispatched.
  parser.feed("id: event-1\nretry: 500\ndata: \n\n", events);
  CHECK(parser.last_event_id() == "event-1");
  CHECK(parser.retry_ms() == 500);
  parser.feed("id: event-2\ndata: {\"x\":1}\n\nretry: 5x\nretry: 99999999999999\nid: a\0b\n\n"sv, events);
  REQUIRE_FALSE(events.empty());
  CHECK(events.back().data == "{\"x\":1}");
  CHECK(parser.last_event_id() == "event-2");  // an ID with NUL is ignored
  CHECK(parser.retry_ms() == 500);             // so are a retry that is not digits and one too long
  parser.feed("id\n\n", events);
  CHECK(parser.last_event_id().empty());  // an empty ID resets it
}
