// SSE line splitting with bounded buffers. Whole runs between terminators are
// appended at once (not byte by byte) so a large chunk costs one copy.
#include "llm/sse_parser.hpp"

#include <algorithm>

namespace harnessd::llm {

void SseParser::feed(std::string_view bytes, std::vector<Event>& out) {
  while (!bytes.empty() && error_ == Error::none) {
    if (after_cr_) {
      after_cr_ = false;
      if (bytes.front() == '\n') {
        bytes.remove_prefix(1);
        continue;
      }
    }
    const std::size_t end = bytes.find_first_of("\r\n");
    const std::string_view piece = bytes.substr(0, end);
    // Checked before appending: the limit holds even for one huge read.
    if (line_.size() + piece.size() > limits_.max_line_bytes) {
      fail(Error::line_too_long);
      return;
    }
    if (end == std::string_view::npos) {
      line_.append(piece);
      return;
    }
    after_cr_ = bytes[end] == '\r';
    if (line_.empty()) {
      on_line(piece, out);
    } else {
      line_.append(piece);
      on_line(line_, out);
      line_.clear();
    }
    bytes.remove_prefix(end + 1);
  }
}

std::string SseParser::error_message() const {
  switch (error_) {
    case Error::none: return {};
    case Error::line_too_long:
      return "the model stream sent a line longer than " + std::to_string(limits_.max_line_bytes) + " bytes";
    case Error::event_too_large:
      return "the model stream sent an event larger than " + std::to_string(limits_.max_event_bytes) + " bytes";
  }
  return {};
}

void SseParser::fail(Error error) {
  error_ = error;
  // Swapped out, not cleared: clear() would keep the capacity.
  std::string().swap(line_);
  std::string().swap(data_);
  std::string().swap(event_);
  has_data_ = false;
}

void SseParser::on_line(std::string_view line, std::vector<Event>& out) {
  if (line.empty()) {
    if (has_data_) out.push_back(Event{std::move(event_), std::move(data_)});
    event_.clear();
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment: keep-alive
  const std::size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    const std::size_t separator = has_data_ ? 1 : 0;
    if (event_.size() + data_.size() + separator + value.size() > limits_.max_event_bytes) {
      fail(Error::event_too_large);
      return;
    }
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
  } else if (field == "event") {
    if (value.size() + data_.size() > limits_.max_event_bytes) {
      fail(Error::event_too_large);
      return;
    }
    event_ = std::string(value);
  } else if (field == "id") {
    // An ID holding NUL is ignored (the format's rule); lines are bounded.
    if (value.find('\0') == std::string_view::npos) last_event_id_ = std::string(value);
  } else if (field == "retry") {
    // Digits only, else ignored; bounded so that the milliseconds fit.
    const bool digits = !value.empty() && value.size() <= 12 &&
                        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) retry_ms_ = std::stoll(std::string(value));
  }
}

}  // namespace harnessd::llm
