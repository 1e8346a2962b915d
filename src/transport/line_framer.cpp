// Line splitting for NDJSON input. One buffer per connection: consumed bytes
// are reclaimed before it grows, and it shrinks back once a large frame is
// gone, so its size follows the frames in flight, not the largest ever seen.
#include "transport/line_framer.hpp"

#include <algorithm>
#include <cstring>

namespace harnessd::transport {

namespace {
bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}
}  // namespace

LineFramer::LineFramer(std::size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

std::span<char> LineFramer::prepare(std::size_t bytes) {
  const std::size_t pending = committed_ - begin_;
  const std::size_t need = pending + bytes;
  // Empty: keep no more than the request (or the idle size). Mid-line: allow
  // twice the need, so a frame growing read by read never reallocates twice.
  const std::size_t keep = pending == 0 ? std::max(need, idle_capacity_bytes)
                                        : std::max(2 * need, idle_capacity_bytes);
  if (data_.capacity() > keep) {
    std::string fresh;
    fresh.resize(need);
    std::memcpy(fresh.data(), data_.data() + begin_, pending);
    data_.swap(fresh);
    scanned_ -= begin_;
    committed_ = pending;
    begin_ = 0;
  } else if (pending == 0) {
    begin_ = scanned_ = committed_ = 0;
  } else if (begin_ > 0 && begin_ >= committed_ / 2) {
    // Reclaim consumed bytes before growing; keeps the buffer near one frame.
    std::memmove(data_.data(), data_.data() + begin_, pending);
    committed_ -= begin_;
    scanned_ -= begin_;
    begin_ = 0;
  }
  if (data_.size() < committed_ + bytes) data_.resize(committed_ + bytes);
  return {data_.data() + committed_, bytes};
}

void LineFramer::commit(std::size_t bytes) {
  committed_ += bytes;
}

void LineFramer::feed(std::string_view bytes) {
  auto space = prepare(bytes.size());
  std::memcpy(space.data(), bytes.data(), bytes.size());
  commit(bytes.size());
}

LineFramer::Next LineFramer::next() {
  for (;;) {
    const std::string_view buffered(data_.data(), committed_);
    const std::size_t newline = buffered.find('\n', scanned_);
    if (discarding_) {
      if (newline == std::string_view::npos) {
        begin_ = scanned_ = committed_;
        return {Kind::need_more, {}};
      }
      discarding_ = false;
      begin_ = scanned_ = newline + 1;
      continue;
    }
    if (newline == std::string_view::npos) {
      scanned_ = committed_;
      // A '\r' at the very end may be the first half of a CRLF split across
      // reads: it is not content yet, so it cannot push a line over the limit.
      std::size_t content = committed_ - begin_;
      if (content > 0 && buffered.back() == '\r') --content;
      if (content > max_frame_bytes_) {
        discarding_ = true;
        begin_ = scanned_ = committed_;
        return {Kind::oversized, {}};
      }
      return {Kind::need_more, {}};
    }
    std::string_view line = buffered.substr(begin_, newline - begin_);
    begin_ = scanned_ = newline + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > max_frame_bytes_) return {Kind::oversized, {}};
    if (is_blank(line)) continue;
    return {Kind::frame, line};
  }
}

}  // namespace harnessd::transport
