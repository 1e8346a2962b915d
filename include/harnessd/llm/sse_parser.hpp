// Server-Sent Events parsing (the text/event-stream format): bytes in, whole
// events out, however the bytes were split across reads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace harnessd::llm {

class SseParser {
 public:
  struct Event {
    std::string event;  ///< "" unless an `event:` field was sent
    std::string data;   ///< `data:` lines joined with '\n'
  };

  /// Appends every event completed by `bytes` to `out`. Comment lines
  /// (keep-alives) and unknown fields are skipped.
  void feed(std::string_view bytes, std::vector<Event>& out);

 private:
  void on_line(std::string_view line, std::vector<Event>& out);

  std::string line_;
  std::string data_;
  std::string event_;
  bool has_data_ = false;
  bool after_cr_ = false;  // a '\r' ended the last line; a following '\n' belongs to it
};

}  // namespace harnessd::llm
