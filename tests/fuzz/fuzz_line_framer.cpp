// Fuzzes the NDJSON framer (transport::LineFramer) that every TCP client's bytes
// go through: whatever the bytes and however reads split them, the frames
// must match a one-pass reading of the whole stream and respect the limit.
#include "fuzz_check.hpp"

#include "transport/line_framer.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using harnessd::transport::LineFramer;

namespace {

struct Item {
  bool oversized;
  std::string frame;
  bool operator==(const Item&) const = default;
};

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

/// The documented behaviour, written the obvious way over the whole input:
/// '\n' ends a line, one '\r' before it is dropped, the limit counts content
/// only, blank lines are skipped, and an unfinished line over the limit is
/// reported once.
std::vector<Item> expected(std::string_view data, std::size_t limit) {
  std::vector<Item> out;
  for (;;) {
    const std::size_t newline = data.find('\n');
    std::string_view line = data.substr(0, newline);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (newline == std::string_view::npos) {
      if (line.size() > limit) out.push_back({true, {}});
      return out;
    }
    if (line.size() > limit) {
      out.push_back({true, {}});
    } else if (!is_blank(line)) {
      out.push_back({false, std::string(line)});
    }
    data.remove_prefix(newline + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  std::string_view data = harnessd::fuzz::as_view(bytes, size);
  if (data.size() < 2) return 0;
  const std::size_t limit = static_cast<unsigned char>(data[0]);
  // Now and then a read offers far more room than it fills, as a socket read
  // into a large buffer does: that grows the buffer past the idle size and
  // exercises giving it back.
  const std::size_t spare_room = (static_cast<unsigned char>(data[1]) & 15u) * 4096;
  data.remove_prefix(2);
  const std::vector<std::size_t> sizes = harnessd::fuzz::take_read_sizes(data);

  LineFramer framer(limit);
  std::vector<Item> got;
  harnessd::fuzz::for_each_read(data, sizes, [&](std::string_view piece, std::size_t i) {
    const std::size_t room = piece.size() + (i % 16 == 0 ? spare_room : 0);
    auto space = framer.prepare(room);
    FUZZ_CHECK(space.size() == room);
    std::memcpy(space.data(), piece.data(), piece.size());
    framer.commit(piece.size());
    for (;;) {
      const LineFramer::Next next = framer.next();
      if (next.kind == LineFramer::Kind::need_more) break;
      if (next.kind == LineFramer::Kind::oversized) {
        got.push_back({true, {}});
        continue;
      }
      FUZZ_CHECK(next.frame.size() <= limit);
      FUZZ_CHECK(next.frame.find('\n') == std::string_view::npos);
      FUZZ_CHECK(!next.frame.empty());
      got.push_back({false, std::string(next.frame)});
    }
    // Between reads only an unfinished line is kept: its content plus at
    // most the '\r' of a CRLF that the next read may complete.
    FUZZ_CHECK(framer.pending_bytes() <= limit + 1);
    // The buffer follows the data in flight (at most a doubling of a
    // doubled request), never the history of the connection.
    const std::size_t need = limit + 1 + room;
    FUZZ_CHECK(framer.capacity() <= std::max(4 * need, 2 * LineFramer::idle_capacity_bytes));
  });
  FUZZ_CHECK(got == expected(data, limit));
  return 0;
}
