#include "harnessd/llm/sse_parser.hpp"

namespace harnessd::llm {

void SseParser::feed(std::string_view bytes, std::vector<Event>& out) {
  for (char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      on_line(line_, out);
      line_.clear();
    } else {
      line_ += c;
    }
  }
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
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
  } else if (field == "event") {
    event_ = std::string(value);
  }
}

}  // namespace harnessd::llm
