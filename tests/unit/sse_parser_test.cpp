#include "harnessd/llm/sse_parser.hpp"

#include <doctest/doctest.h>

using harnessd::llm::SseParser;

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
