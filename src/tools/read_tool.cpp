// The `read` tool (AGENT.md §2): a text file's lines, numbered, within the
// model's budget (2000 lines, 2000 bytes a line, 50 KiB), streamed so a
// huge file costs only what is shown. Records what was read for write/edit.
#include "llm/cancel_scope.hpp"
#include "tools/builtin.hpp"
#include "tools/file_util.hpp"
#include "tools/read_tracker.hpp"
#include "tools/tool_pool.hpp"

#include <boost/json/parse.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>

namespace harnessd::tools {
namespace read_tool {

namespace asio = boost::asio;
namespace json = boost::json;

constexpr std::size_t max_lines = 2000;
constexpr std::size_t max_line_bytes = 2000;
constexpr std::size_t max_output_bytes = 50 * 1024;
/// How far past the shown lines the file is scanned to count its lines.
constexpr std::uint64_t max_count_bytes = std::uint64_t{256} << 20;

constexpr std::string_view description_text =
    "Reads a text file of the workspace. Lines come back as `     N\\tTEXT` (N = line number, "
    "right-aligned to 6; the prefix is not part of the file). At most 2000 lines, 2000 bytes per "
    "line and 50 KiB per call; when the output is cut its last line says so and gives the offset to "
    "continue from. For large files read a slice with `offset` (1-based first line) and `limit` "
    "(number of lines), after locating the place with grep. `file_path` is absolute or relative to "
    "the workspace. Always read a file before you edit or overwrite it: edit and write refuse files "
    "this session has not read since they last changed. Binary files are refused (BINARY_FILE); use "
    "glob to list a directory. Prefer this tool over cat/head/tail in bash.";

struct Request {
  std::filesystem::path path;
  std::string shown;
  std::uint64_t first = 1;  ///< 1-based
  std::size_t limit = max_lines;
};

void append_number(std::string& out, std::uint64_t number) {
  char buffer[32];
  const int n = std::snprintf(buffer, sizeof buffer, "%6llu\t", static_cast<unsigned long long>(number));
  out.append(buffer, static_cast<std::size_t>(n));
}

/// Lines of a file streamed in chunks, each kept only up to what is shown.
class LineFormatter {
 public:
  explicit LineFormatter(const Request& request) : request_(request) {}

  /// Feeds a chunk; false once nothing more needs formatting (counting goes on).
  void feed(std::string_view chunk) {
    while (!chunk.empty()) {
      if (full_) {
        // Only counting now.
        const char* p = chunk.data();
        const char* end = p + chunk.size();
        while ((p = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)))) != nullptr) {
          ++lines_;
          ++p;
          open_ = false;
        }
        if (chunk.back() != '\n') open_ = true;
        return;
      }
      const std::size_t nl = chunk.find('\n');
      const std::string_view piece = chunk.substr(0, nl);
      if (current_.size() < max_line_bytes + 4) {
        current_.append(piece.substr(0, max_line_bytes + 4 - current_.size()));
      }
      current_bytes_ += piece.size();
      open_ = true;
      if (nl == std::string_view::npos) return;
      end_line();
      chunk.remove_prefix(nl + 1);
    }
  }

  void finish() {
    if (open_ && !full_) end_line();
    else if (open_) ++lines_;
  }

  std::string take(bool counted_all) {
    std::string note;
    if (lines_ == 0) return "[the file is empty]";
    if (shown_ == 0 && request_.first > lines_) {
      return "[offset " + std::to_string(request_.first) + " is past the end: the file has " +
             std::to_string(lines_) + " lines]";
    }
    if (!long_lines_.empty()) {
      note += "[line";
      note += long_lines_.size() > 1 ? "s " : " ";
      for (std::size_t i = 0; i < long_lines_.size() && i < 10; ++i) {
        if (i) note += ", ";
        note += std::to_string(long_lines_[i]);
      }
      if (long_lines_.size() > 10) note += ", ...";
      note += " cut at 2000 bytes]";
    }
    const std::uint64_t last = request_.first + shown_ - 1;
    if (shown_ > 0 && (last < lines_ || !counted_all)) {
      if (!note.empty()) note += ' ';
      note += cut_by_bytes_ ? "[output cut at 50 KiB: showing lines " : "[showing lines ";
      note += std::to_string(request_.first) + "-" + std::to_string(last);
      if (counted_all) {
        note += " of " + std::to_string(lines_);
      } else {
        note += " of more than " + std::to_string(lines_);
      }
      note += "; use offset=" + std::to_string(last + 1) + " to read more]";
    }
    if (!note.empty()) {
      out_ += note;
      out_ += '\n';
    }
    return std::move(out_);
  }

  bool counting_only() const noexcept { return full_; }

 private:
  void end_line() {
    ++lines_;
    const std::uint64_t number = lines_;
    std::string_view text(current_);
    const bool long_line = current_bytes_ > max_line_bytes;
    if (!long_line && !text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (number >= request_.first) {
      bool cut = false;
      std::string line = files::display_line(text, max_line_bytes, cut);
      std::string formatted;
      append_number(formatted, number);
      formatted += line;
      formatted += '\n';
      if (out_.size() + formatted.size() > max_output_bytes) {
        cut_by_bytes_ = true;
        full_ = true;
      } else {
        out_ += formatted;
        if (long_line) long_lines_.push_back(number);
        if (++shown_ == request_.limit) full_ = true;
      }
    }
    current_.clear();
    current_bytes_ = 0;
    open_ = false;
  }

  const Request& request_;
  std::string out_;
  std::string current_;
  std::uint64_t current_bytes_ = 0;
  std::uint64_t lines_ = 0;
  std::uint64_t shown_ = 0;
  bool open_ = false;  ///< a line has started and not ended
  bool full_ = false;
  bool cut_by_bytes_ = false;
  std::vector<std::uint64_t> long_lines_;
};

ToolResult read_file(const Request& request, const llm::CancelScope& cancel, std::optional<FileStamp>& stamp) {
  int error = 0;
  files::UniqueFd fd = files::open_read_nofollow(request.path, error);
  if (!fd) return files::open_failure(error, request.shown);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return files::open_failure(errno, request.shown);
  if (S_ISDIR(st.st_mode)) return files::open_failure(EISDIR, request.shown);
  if (!S_ISREG(st.st_mode)) return ToolResult::failure("NOT_A_FILE", request.shown + " is not a regular file");

  LineFormatter lines(request);
  std::string buffer(std::size_t{1} << 20, '\0');
  std::uint64_t total = 0;
  std::uint64_t counted_after_full = 0;
  bool first = true;
  bool counted_all = true;
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return files::open_failure(errno, request.shown);
    }
    if (n == 0) break;
    const std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
    if (first && files::looks_binary(chunk)) {
      return ToolResult::failure("BINARY_FILE", request.shown + " is a binary file (it holds NUL bytes); not shown");
    }
    first = false;
    total += chunk.size();
    lines.feed(chunk);
    if (lines.counting_only()) {
      counted_after_full += chunk.size();
      if (counted_after_full > max_count_bytes) {
        counted_all = false;
        break;
      }
      if (cancel.cancelled()) return files::cancelled_result();
    }
  }
  lines.finish();
  stamp = files::stamp_from_stat(st);
  ToolResult result;
  result.text = lines.take(counted_all);
  result.meta["path"] = request.shown;
  result.meta["bytes"] = total;
  return result;
}

class ReadTool final : public Tool {
 public:
  ReadTool()
      : schema_(json::parse(R"json({
          "type": "object",
          "properties": {
            "file_path": {"type": "string", "description": "The file to read: absolute, or relative to the workspace"},
            "offset": {"type": "integer", "minimum": 1, "description": "The first line to read (1-based); for large files"},
            "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read (at most 2000)"}
          },
          "required": ["file_path"]
        })json").as_object()) {}

  std::string_view name() const override { return "read"; }
  std::string_view description() const override { return description_text; }
  const json::object& input_schema() const override { return schema_; }
  bool read_only() const override { return true; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    std::string error;
    const std::optional<std::string> file_path = files::string_arg(args, "file_path", error);
    const std::optional<std::int64_t> offset = files::int_arg(args, "offset", error);
    const std::optional<std::int64_t> limit = files::int_arg(args, "limit", error);
    if (!error.empty()) co_return files::invalid_arguments(error);
    if (!file_path) co_return files::invalid_arguments("file_path is required");
    if (offset && *offset < 0) co_return files::invalid_arguments("offset must be a line number (1 or more)");
    if (limit && *limit < 1) co_return files::invalid_arguments("limit must be 1 or more");

    Request request;
    if (auto refused = files::resolve_path(context.workspace, *file_path, request.path)) co_return std::move(*refused);
    request.shown = context.workspace.display(request.path);
    request.first = offset && *offset > 0 ? static_cast<std::uint64_t>(*offset) : 1;
    if (limit) request.limit = std::min<std::size_t>(static_cast<std::size_t>(*limit), max_lines);

    std::optional<FileStamp> stamp;
    const llm::CancelScope& cancel = context.cancel;
    std::function<ToolResult()> work = [&request, &cancel, &stamp] { return read_file(request, cancel, stamp); };
    ToolResult result = co_await context.pool.run(std::move(work));
    if (stamp) context.reads.record(request.path, *stamp);
    co_return result;
  }

 private:
  json::object schema_;
};

}  // namespace read_tool

std::unique_ptr<Tool> make_read_tool() { return std::make_unique<read_tool::ReadTool>(); }

}  // namespace harnessd::tools
