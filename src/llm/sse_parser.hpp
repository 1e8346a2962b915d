// Server-Sent Events parsing (the text/event-stream format): bytes in, whole
// events out, however the bytes were split across reads. Lines and events are
// bounded so a model endpoint that never ends a line cannot grow memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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

  /// Far above any real chunk (a few KiB) yet small enough that a runaway
  /// stream costs the daemon only a few MiB per model call.
  static constexpr std::size_t default_max_line_bytes = std::size_t{1} << 20;   // 1 MiB
  static constexpr std::size_t default_max_event_bytes = std::size_t{4} << 20;  // 4 MiB

  struct Limits {
    std::size_t max_line_bytes = default_max_line_bytes;    ///< one line, terminator excluded
    std::size_t max_event_bytes = default_max_event_bytes;  ///< `event` plus the joined `data`
  };

  enum class Error {
    none,
    line_too_long,    ///< a line grew past max_line_bytes without a terminator
    event_too_large,  ///< an event's data grew past max_event_bytes
  };

  SseParser() = default;
  explicit SseParser(Limits limits) : limits_(limits) {}

  /// Appends every event completed by `bytes` to `out`. Comment lines
  /// (keep-alives) and unknown fields are skipped. Once a limit is exceeded
  /// error() says which, the buffers are released and further input is ignored.
  void feed(std::string_view bytes, std::vector<Event>& out);

  Error error() const noexcept { return error_; }
  /// A sentence for the turn's error message; "" while error() is none.
  std::string error_message() const;
  const Limits& limits() const noexcept { return limits_; }
  /// The stream's last event ID (the latest `id:` field; "" until one came),
  /// what a reconnecting client sends as Last-Event-ID.
  const std::string& last_event_id() const noexcept { return last_event_id_; }
  /// The stream's reconnection time (the latest valid `retry:` field), in ms.
  std::optional<std::int64_t> retry_ms() const noexcept { return retry_ms_; }
  /// Bytes held for the unfinished line and event.
  std::size_t buffered_bytes() const noexcept { return line_.size() + data_.size() + event_.size(); }

 private:
  void on_line(std::string_view line, std::vector<Event>& out);
  void fail(Error error);

  Limits limits_;
  Error error_ = Error::none;
  std::string line_;
  std::string data_;
  std::string event_;
  std::string last_event_id_;
  std::optional<std::int64_t> retry_ms_;
  bool has_data_ = false;
  bool after_cr_ = false;  // a '\r' ended the last line; a following '\n' belongs to it
};

}  // namespace harnessd::llm
