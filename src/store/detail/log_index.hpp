// Where the lines of one session log start, sparsely: a mark every
// `mark_every_lines` events or `mark_every_bytes` bytes, plus the log's known
// end. A session/events page then starts reading at the nearest mark before
// it instead of at byte 0, and counts the lines after a full page only from
// the known end, so paging through a long log costs O(page), not O(log).
//
// Shared by the log's appender (the session strand) and page readers (the
// disk pool), hence the mutex. Every mark is an exact line start of a file
// that only grows; the one exception, a torn tail cut away when the log is
// opened, resets the index and bumps its generation, and what a reader
// learned from the file before that is refused.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace harnessd::store::detail {

class LogIndex {
 public:
  static constexpr std::int64_t mark_every_lines = 64;
  static constexpr std::uint64_t mark_every_bytes = 64 * 1024;

  /// The line of event `seq` starts at byte `offset` (seq -1: the header).
  struct Mark {
    std::int64_t seq = -1;
    std::uint64_t offset = 0;
  };

  /// What a reader needs before it scans.
  struct Start {
    Mark from;             ///< the last mark at or before line after_seq + 1
    Mark end;              ///< lines before end.seq are complete and end before end.offset
    std::uint64_t generation = 0;
  };

  Start start_for(std::int64_t after_seq) const {
    std::lock_guard lock(mutex_);
    Start start{Mark{}, end_, generation_};
    const std::int64_t first_wanted = after_seq + 1;
    // The last mark with seq <= first_wanted.
    std::size_t lo = 0;
    std::size_t hi = marks_.size();
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (marks_[mid].seq <= first_wanted) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo > 0) start.from = marks_[lo - 1];
    return start;
  }

  /// Whether a line starting at `line` is far enough past `last` to be marked.
  static bool worth_marking(const Mark& last, const Mark& line) {
    return line.seq - last.seq >= mark_every_lines || line.offset - last.offset >= mark_every_bytes;
  }

  /// Lines a reader or the appender saw (ascending, each an exact line
  /// start) and where the log ended for it. Ignored when the index was reset
  /// since `generation` was read.
  void learn(std::span<const Mark> lines, Mark end, std::uint64_t generation) {
    std::lock_guard lock(mutex_);
    if (generation != generation_) return;
    for (const Mark& line : lines) {
      const Mark last = marks_.empty() ? Mark{} : marks_.back();
      if (line.seq > last.seq && worth_marking(last, line)) marks_.push_back(line);
    }
    if (end.seq > end_.seq) end_ = end;
  }

  /// The log was (re)loaded or a write failed: forget everything.
  /// Returns the new generation.
  std::uint64_t reset() {
    std::lock_guard lock(mutex_);
    marks_.clear();
    end_ = Mark{};
    return ++generation_;
  }

  std::uint64_t generation() const {
    std::lock_guard lock(mutex_);
    return generation_;
  }

  std::size_t marks() const {
    std::lock_guard lock(mutex_);
    return marks_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Mark> marks_;  ///< ascending by seq and offset
  Mark end_;
  std::uint64_t generation_ = 0;
};

}  // namespace harnessd::store::detail
