// NDJSON framing over a byte stream: splits on '\n', accepts "\r\n", skips
// blank lines and enforces the frame size limit with recovery at the next
// newline. Pure: the caller reads bytes into prepare()/commit().
//
// The limit counts a frame's content only: the '\n' and one '\r' before it
// never count, wherever the read boundaries fall.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace harnessd::transport {

class LineFramer {
 public:
  enum class Kind {
    frame,      ///< `frame` holds one line without its terminator
    oversized,  ///< a line exceeded the limit; its bytes up to '\n' are discarded
    need_more,  ///< no complete line buffered: read more bytes
  };
  struct Next {
    Kind kind;
    std::string_view frame;  ///< valid until the next prepare()
  };

  /// The buffer an idle connection keeps: with no partial line pending,
  /// prepare() gives back any larger allocation (left by a big frame) so
  /// thousands of quiet connections cost little memory.
  /// One page: requests are small, and a larger frame grows the buffer.
  static constexpr std::size_t idle_capacity_bytes = 4 * 1024;

  explicit LineFramer(std::size_t max_frame_bytes);

  /// Space for the next read; pass the bytes actually read to commit().
  /// Invalidates the last frame returned by next().
  std::span<char> prepare(std::size_t bytes);
  void commit(std::size_t bytes);

  /// Convenience for tests and in-memory sources.
  void feed(std::string_view bytes);

  Next next();

  /// Bytes of an incomplete line buffered (0 while discarding).
  std::size_t pending_bytes() const noexcept { return committed_ - begin_; }
  /// Bytes allocated for the buffer.
  std::size_t capacity() const noexcept { return data_.capacity(); }

 private:
  std::size_t max_frame_bytes_;
  std::string data_;
  std::size_t begin_ = 0;      // first byte not yet returned
  std::size_t scanned_ = 0;    // bytes before this offset hold no '\n'
  std::size_t committed_ = 0;  // bytes of data_ that are real input
  bool discarding_ = false;    // inside an oversized line
};

}  // namespace harnessd::transport
