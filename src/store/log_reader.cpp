#include "detail/log_reader.hpp"

#include "store/errc.hpp"
#include "util/json_limits.hpp"

#include <boost/json/parse.hpp>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

namespace harnessd::store::detail {
namespace json = boost::json;

namespace {

/// Closes a descriptor when it goes out of scope.
struct FileCloser {
  int fd;
  ~FileCloser() {
    if (fd >= 0) ::close(fd);
  }
};

/// Reads up to `size` bytes at `offset`; fewer at the end of the file.
std::string read_at(int fd, std::uint64_t offset, std::size_t size) {
  std::string out(size, '\0');
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, out.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "read");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

std::optional<json::object> parse_object(std::string_view line) {
  json::error_code ec;
  json::value v = json::parse(line, ec, {}, util::log_parse_options());
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.get_object());
}

std::int64_t int_field(const json::object& obj, std::string_view key, std::int64_t fallback) {
  const json::value* v = obj.if_contains(key);
  return v != nullptr && v->is_int64() ? v->get_int64() : fallback;
}

/// The `turn` of an event's data, when it has one.
std::optional<std::int64_t> turn_of(const json::object& event) {
  const json::value* data = event.if_contains("data");
  if (data == nullptr || !data->is_object()) return std::nullopt;
  const json::value* turn = data->get_object().if_contains("turn");
  if (turn == nullptr || !turn->is_int64()) return std::nullopt;
  return turn->get_int64();
}

// A header line is short (an id of at most 256 bytes, escaped, and a path);
// an event line may be megabytes, so the tail is read in growing windows.
constexpr std::size_t header_window = 64 * 1024;
constexpr std::size_t first_tail_window = 64 * 1024;

}  // namespace

std::optional<SessionInfo> summarize_log(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    spdlog::warn("session list: cannot open {}: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  FileCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::nullopt;
  const auto size = static_cast<std::uint64_t>(st.st_size);

  const std::string head = read_at(fd, 0, header_window);
  const std::size_t header_end = head.find('\n');
  std::optional<json::object> header =
      header_end == std::string::npos ? std::nullopt : parse_object(std::string_view(head).substr(0, header_end));
  const json::value* id = header ? header->if_contains("id") : nullptr;
  if (id == nullptr || !id->is_string()) {
    spdlog::warn("session list: {} has no session header, skipped", path);
    return std::nullopt;
  }
  SessionInfo info;
  info.id = std::string(id->get_string());
  info.created_at_ms = int_field(*header, "createdAt", 0);
  info.updated_at_ms = info.created_at_ms;
  if (const json::value* parent = header->if_contains("parentSession"); parent && parent->is_string()) {
    info.parent = std::string(parent->get_string());
  }

  // The last complete line gives seq and time; the last line with a turn
  // gives the turns. Every line after the header is one event.
  const std::uint64_t events_start = header_end + 1;
  bool have_last = false;
  for (std::size_t window = first_tail_window;; window *= 4) {
    const std::uint64_t from = size > events_start + window ? size - window : events_start;
    const std::string tail = read_at(fd, from, static_cast<std::size_t>(size - from));
    // Only lines that begin inside the window and end in '\n' are whole.
    std::size_t end = tail.rfind('\n');
    while (end != std::string::npos) {
      const std::size_t prev = end == 0 ? std::string::npos : tail.rfind('\n', end - 1);
      if (prev == std::string::npos && from != events_start) break;  // its start is before the window
      const std::size_t start = prev == std::string::npos ? 0 : prev + 1;
      if (std::optional<json::object> event = parse_object(std::string_view(tail).substr(start, end - start))) {
        if (!have_last) {
          have_last = true;
          info.last_seq = int_field(*event, "seq", -1);
          info.updated_at_ms = int_field(*event, "time", info.created_at_ms);
        }
        if (std::optional<std::int64_t> turn = turn_of(*event)) {
          info.turns = *turn + 1;
          return info;
        }
      }
      end = prev;
    }
    if (from == events_start) return info;  // the whole log was read
  }
}

std::optional<EventPage> read_log_page(const std::string& path, std::int64_t after_seq, std::size_t limit,
                                       std::size_t max_bytes, LogIndex* index,
                                       std::atomic<std::uint64_t>* bytes_read) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw std::system_error(errno, std::generic_category(), "open " + path);
  }
  FileCloser closer{fd};
  // Without an index the scan starts at the header (mark -1 at byte 0).
  const LogIndex::Start start = index != nullptr ? index->start_for(after_seq) : LogIndex::Start{};
  std::vector<LogIndex::Mark> seen;  // line starts worth an index mark
  LogIndex::Mark last_mark = start.from;
  EventPage page;
  std::size_t page_bytes = 0;
  std::int64_t line = start.from.seq;  // the line being read: -1 is the header, N the event with seq N
  std::uint64_t line_start = start.from.offset;
  std::optional<std::int64_t> bad_line;
  std::string pending;     // the start of a page line that continues in the next chunk
  std::uint64_t offset = start.from.offset;
  constexpr std::size_t chunk_size = 1 << 20;
  bool page_full = false;
  for (;;) {
    std::string chunk = read_at(fd, offset, chunk_size);
    if (bytes_read != nullptr) bytes_read->fetch_add(chunk.size(), std::memory_order_relaxed);
    if (chunk.empty()) break;
    const std::uint64_t chunk_start = offset;
    offset += chunk.size();
    std::size_t pos = 0;
    while (pos < chunk.size()) {
      if (page_full && start.end.seq > line) {
        // The lines up to the known end need no counting: go there.
        line = start.end.seq;
        line_start = offset = start.end.offset;
        pending.clear();
        break;
      }
      const bool wanted = line >= 0 && line > after_seq && !page_full;
      const char* newline = static_cast<const char*>(std::memchr(chunk.data() + pos, '\n', chunk.size() - pos));
      if (newline == nullptr) {
        if (wanted) pending.append(chunk, pos);  // other lines are only counted
        break;
      }
      const std::size_t end = static_cast<std::size_t>(newline - chunk.data());
      if (wanted) {
        std::string text = pending.append(chunk, pos, end - pos);
        // The daemon writes only JSON objects. A line that is not one ends
        // the page: it is a torn tail if it is the last, else a corrupt log.
        // It is never copied into a response.
        if (parse_object(text)) {
          page_bytes += text.size();
          page.events.push_back(std::move(text));
          page_full = page.events.size() >= limit || page_bytes >= max_bytes;
        } else {
          bad_line = line;
          page_full = true;
        }
      }
      pending.clear();
      ++line;
      pos = end + 1;
      line_start = chunk_start + pos;
      if (index != nullptr && LogIndex::worth_marking(last_mark, {line, line_start})) {
        last_mark = {line, line_start};
        seen.push_back(last_mark);
      }
    }
  }
  // `line` is now the first line not ended by '\n': one being written, or torn.
  if (index != nullptr) index->learn(seen, {line, line_start}, start.generation);
  page.last_seq = std::max<std::int64_t>(line - 1, -1);
  if (bad_line) {
    if (*bad_line != page.last_seq) throw std::system_error(errc::corrupt_line, "corrupt line inside " + path);
    page.last_seq = *bad_line - 1;  // a torn tail, dropped when the session is next opened
  }
  const std::int64_t last_returned = after_seq + static_cast<std::int64_t>(page.events.size());
  page.more = page.last_seq > last_returned;
  return page;
}

}  // namespace harnessd::store::detail
