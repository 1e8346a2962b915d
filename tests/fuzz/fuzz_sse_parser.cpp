// Fuzzes the SSE parser that reads model endpoints: events and errors must
// not depend on how the stream was split into reads, and the line and event
// limits must hold for the buffers as well as for the events handed out.
#include "fuzz_check.hpp"

#include "llm/sse_parser.hpp"

#include <vector>

using harnessd::llm::SseParser;

namespace {

bool same(const std::vector<SseParser::Event>& a, const std::vector<SseParser::Event>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].event != b[i].event || a[i].data != b[i].data) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  std::string_view data = harnessd::fuzz::as_view(bytes, size);
  if (data.size() < 2) return 0;
  // Small limits, so inputs of a few KiB reach them; 0 is a legal limit.
  const SseParser::Limits limits{.max_line_bytes = static_cast<unsigned char>(data[0]) * std::size_t{4},
                                 .max_event_bytes = static_cast<unsigned char>(data[1]) * std::size_t{8}};
  data.remove_prefix(2);
  const std::vector<std::size_t> sizes = harnessd::fuzz::take_read_sizes(data);

  SseParser whole(limits);
  std::vector<SseParser::Event> whole_events;
  whole.feed(data, whole_events);

  SseParser split(limits);
  std::vector<SseParser::Event> split_events;
  harnessd::fuzz::for_each_read(data, sizes, [&](std::string_view piece, std::size_t) {
    split.feed(piece, split_events);
    FUZZ_CHECK(split.buffered_bytes() <= limits.max_line_bytes + limits.max_event_bytes);
    if (split.error() != SseParser::Error::none) FUZZ_CHECK(split.buffered_bytes() == 0);
  });

  FUZZ_CHECK(whole.error() == split.error());
  FUZZ_CHECK(same(whole_events, split_events));
  FUZZ_CHECK(whole.error_message().empty() == (whole.error() == SseParser::Error::none));
  for (const SseParser::Event& e : split_events) {
    FUZZ_CHECK(e.event.size() + e.data.size() <= limits.max_event_bytes);
  }

  // After an error the parser is inert: no events, no buffering.
  if (split.error() != SseParser::Error::none) {
    std::vector<SseParser::Event> after;
    split.feed("data: x\n\n", after);
    FUZZ_CHECK(after.empty() && split.buffered_bytes() == 0);
  }

  // The production limits on the same bytes: no limit is near, so every
  // event the small-limit parser produced before failing is produced too.
  SseParser roomy;
  std::vector<SseParser::Event> roomy_events;
  roomy.feed(data, roomy_events);
  FUZZ_CHECK(roomy.error() == SseParser::Error::none);
  FUZZ_CHECK(roomy_events.size() >= split_events.size());
  roomy_events.resize(split_events.size());
  FUZZ_CHECK(same(roomy_events, split_events));
  return 0;
}
