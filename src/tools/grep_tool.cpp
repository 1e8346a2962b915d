// The `grep` tool (AGENT.md §2): lines matching an ECMAScript regex
// (Boost.Regex) in the workspace's text files, as PATH:LINE:TEXT, at most
// 250. Each file is read in one go and searched as a whole buffer.
#include "tools/builtin.hpp"
#include "tools/file_util.hpp"
#include "tools/tool_pool.hpp"

#include "llm/cancel_scope.hpp"

#include <boost/json/parse.hpp>
#include <boost/regex.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

namespace harnessd::tools {
namespace grep_tool {

namespace asio = boost::asio;
namespace json = boost::json;

constexpr std::size_t max_matches = 250;
constexpr std::size_t max_line_bytes = 2000;
/// Larger files are skipped (and said so): they are data, not source.
constexpr std::size_t max_file_bytes = std::size_t{256} << 20;

constexpr std::string_view description_text =
    "Searches file contents: the lines matching the regular expression `pattern` (ECMAScript "
    "syntax, e.g. `fn\\s+\\w+`, `TODO|FIXME`; escape literal metacharacters like `\\.` `\\(`) in "
    "the files under `path` (a directory or one file; default: the workspace root), optionally only "
    "files whose name matches the glob `include` (e.g. `*.cpp`, `*.{ts,tsx}`; a glob with a `/` "
    "matches the path below `path`). Returns `PATH:LINE:TEXT` lines (PATH relative to the "
    "workspace root, LINE 1-based), at most 250 matches and 2000 bytes per line; the last line says "
    "when it stopped early: narrow the pattern, path or include. Skips binary files, .git, "
    ".gitignored files and symlinks. Use this instead of grep/rg in bash, then read the file around "
    "the line numbers it gives.";

/// The literal text every match of `pattern` starts with ("" when unsure):
/// memmem finds the candidates, the regex is tried only there.
std::string literal_prefix(std::string_view pattern) {
  if (pattern.find('|') != std::string_view::npos) return {};
  std::string prefix;
  for (const char c : pattern) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) {
      if (c == '?' || c == '*' || c == '{') {
        if (!prefix.empty()) prefix.pop_back();  // the last literal is optional
      }
      break;
    }
    prefix += c;
  }
  return prefix.size() >= 3 ? prefix : std::string();
}

struct Request {
  std::filesystem::path start;
  std::string pattern;
  std::optional<std::string> include;
};

class Searcher {
 public:
  Searcher(const boost::regex& regex, std::string prefix, const Workspace& workspace)
      : regex_(regex), prefix_(std::move(prefix)), workspace_(workspace) {}

  std::string out;
  std::size_t matches = 0;
  std::size_t files_matched = 0;
  std::size_t too_large = 0;
  std::size_t too_complex = 0;

  bool full() const noexcept { return matches >= max_matches; }

  /// Searches the file `name` of `dir_fd`, shown as `shown`.
  void search(int dir_fd, const char* name, const std::filesystem::path& path) {
    files::UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (static_cast<std::uint64_t>(st.st_size) > max_file_bytes) {
      ++too_large;
      return;
    }
    if (!files::read_all(fd.get(), static_cast<std::size_t>(st.st_size), buffer_)) return;
    if (files::looks_binary(buffer_)) return;
    const char* const begin = buffer_.data();
    const char* const end = begin + buffer_.size();
    const char* from = begin;
    const char* counted = begin;  // line numbers are known up to here
    std::uint64_t line = 1;
    std::string shown;
    boost::cmatch match;
    try {
      while (from < end && !full()) {
        auto flags = boost::match_default | boost::match_not_dot_newline;
        if (!prefix_.empty()) {
          // Every match starts with the prefix: try the regex anchored at
          // each occurrence only.
          const void* at = ::memmem(from, static_cast<std::size_t>(end - from), prefix_.data(), prefix_.size());
          if (!at) break;
          const char* candidate = static_cast<const char*>(at);
          if (candidate != begin) flags |= boost::match_prev_avail;
          if (!boost::regex_search(candidate, end, match, regex_, flags | boost::match_continuous)) {
            from = candidate + 1;
            continue;
          }
        } else {
          if (from != begin) flags |= boost::match_prev_avail;
          if (!boost::regex_search(from, end, match, regex_, flags)) break;
        }
        const char* hit = match[0].first;
        const char* line_start = hit;
        while (line_start > begin && line_start[-1] != '\n') --line_start;
        const char* line_end = static_cast<const char*>(std::memchr(hit, '\n', static_cast<std::size_t>(end - hit)));
        if (!line_end) line_end = end;
        line += static_cast<std::uint64_t>(std::count(counted, line_start, '\n'));
        counted = line_start;
        if (shown.empty()) shown = workspace_.display(path);
        std::string_view text(line_start, static_cast<std::size_t>(line_end - line_start));
        if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
        bool cut = false;
        out += shown;
        out += ':';
        out += std::to_string(line);
        out += ':';
        out += files::display_line(text, max_line_bytes, cut);
        out += '\n';
        ++matches;
        if (line_end == end) break;
        from = line_end + 1;  // the next line: one result per line
      }
    } catch (const std::runtime_error&) {
      ++too_complex;  // Boost.Regex gives up on catastrophic backtracking
    }
    if (!shown.empty()) ++files_matched;
  }

 private:
  const boost::regex& regex_;
  const std::string prefix_;
  const Workspace& workspace_;
  std::string buffer_;
};

ToolResult run_grep(const Request& request, const Workspace& workspace, const llm::CancelScope& cancel) {
  boost::regex regex;
  try {
    regex.assign(request.pattern, boost::regex::ECMAScript);
  } catch (const boost::regex_error& e) {
    return files::invalid_arguments("pattern is not a valid regular expression: " + std::string(e.what()));
  }
  std::optional<files::GlobSet> include;
  bool include_path = false;
  if (request.include && !request.include->empty()) {
    include.emplace(*request.include);
    include_path = request.include->find('/') != std::string::npos;
  }

  struct stat st {};
  if (::stat(request.start.c_str(), &st) != 0) return files::open_failure(errno, workspace.display(request.start));
  Searcher searcher(regex, literal_prefix(request.pattern), workspace);
  bool cancelled = false;
  if (S_ISREG(st.st_mode)) {
    // One file, as asked for: no include or .gitignore filter.
    int error = 0;
    auto parent = files::open_parent(request.start, false, error);
    if (!parent) return files::open_failure(error, workspace.display(request.start));
    searcher.search(parent->dir.get(), parent->leaf.c_str(), request.start);
  } else if (S_ISDIR(st.st_mode)) {
    files::WalkOptions options;
    options.workspace = &workspace;
    options.cancel = &cancel;
    if (include && include_path) {
      options.enter_dir = [&include](std::string_view rel_dir) { return include->could_match_below(rel_dir); };
    }
    std::string name;
    const std::function<bool(const files::WalkEntry&)> visit = [&](const files::WalkEntry& entry) {
      if (include && !include->matches(include_path ? entry.rel_path : entry.name)) return true;
      name.assign(entry.name);
      searcher.search(entry.dir_fd, name.c_str(), request.start / entry.rel_path);
      return !searcher.full() && !cancel.cancelled();
    };
    std::string error;
    const files::WalkStatus status = files::walk_files(request.start, options, visit, error);
    if (status == files::WalkStatus::failed) return ToolResult::failure("IO_ERROR", error);
    cancelled = status == files::WalkStatus::cancelled || (status == files::WalkStatus::stopped && !searcher.full());
  } else {
    return ToolResult::failure("NOT_A_FILE", workspace.display(request.start) + " is not a file or directory");
  }
  if (cancelled) return files::cancelled_result();

  ToolResult result;
  result.text = std::move(searcher.out);
  if (searcher.matches == 0) result.text = "No matches for " + request.pattern + " in " + workspace.display(request.start) + "\n";
  if (searcher.full()) {
    result.text += "[stopped at 250 matches; narrow the pattern, path or include]\n";
  }
  if (searcher.too_large > 0) {
    result.text += "[" + std::to_string(searcher.too_large) + " file(s) over 256 MiB not searched]\n";
  }
  if (searcher.too_complex > 0) {
    result.text += "[" + std::to_string(searcher.too_complex) +
                   " file(s) not fully searched: the pattern is too complex for them; simplify it]\n";
  }
  result.meta["matches"] = searcher.matches;
  result.meta["files"] = searcher.files_matched;
  result.meta["truncated"] = searcher.full();
  return result;
}

class GrepTool final : public Tool {
 public:
  GrepTool()
      : schema_(json::parse(R"json({
          "type": "object",
          "properties": {
            "pattern": {"type": "string", "description": "ECMAScript regular expression to search for"},
            "path": {"type": "string", "description": "A directory or file to search (default: the workspace root)"},
            "include": {"type": "string", "description": "Only files matching this glob, e.g. *.py or *.{ts,tsx}"}
          },
          "required": ["pattern"]
        })json").as_object()) {}

  std::string_view name() const override { return "grep"; }
  std::string_view description() const override { return description_text; }
  const json::object& input_schema() const override { return schema_; }
  bool read_only() const override { return true; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    std::string error;
    const std::optional<std::string> pattern = files::string_arg(args, "pattern", error);
    const std::optional<std::string> path = files::string_arg(args, "path", error);
    std::optional<std::string> include = files::string_arg(args, "include", error);
    if (!error.empty()) co_return files::invalid_arguments(error);
    if (!pattern) co_return files::invalid_arguments("pattern is required");

    Request request;
    if (auto refused = files::resolve_path(context.workspace, path.value_or("."), request.start)) {
      co_return std::move(*refused);
    }
    request.pattern = *pattern;
    request.include = std::move(include);
    const Workspace& workspace = context.workspace;
    const llm::CancelScope& cancel = context.cancel;
    std::function<ToolResult()> work = [&request, &workspace, &cancel] { return run_grep(request, workspace, cancel); };
    ToolResult result = co_await context.pool.run(std::move(work));
    co_return result;
  }

 private:
  json::object schema_;
};

}  // namespace grep_tool

std::unique_ptr<Tool> make_grep_tool() { return std::make_unique<grep_tool::GrepTool>(); }

}  // namespace harnessd::tools
