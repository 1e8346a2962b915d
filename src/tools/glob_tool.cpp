// The `glob` tool (AGENT.md §2): the workspace's files whose paths match a
// glob (`**` included), sorted, at most 100; the walk skips `.git` and
// .gitignored paths and never follows symlinks.
#include "llm/cancel_scope.hpp"
#include "tools/builtin.hpp"
#include "tools/file_util.hpp"
#include "tools/tool_pool.hpp"

#include <boost/json/parse.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <vector>

namespace harnessd::tools {
namespace glob_tool {

namespace asio = boost::asio;
namespace json = boost::json;

constexpr std::size_t max_results = 100;
/// Matches collected before the walk stops (the count is then a lower bound).
constexpr std::size_t max_collected = 100'000;

constexpr std::string_view description_text =
    "Finds files by name: the files under `path` (default: the workspace root) whose path relative "
    "to `path` matches the glob `pattern`. `*` and `?` match within one path component, `[abc]` a "
    "character class, `{a,b}` alternatives, and `**` any number of directories: `**/*.cpp` finds "
    "C++ files at any depth, `*.cpp` only directly in `path`, `src/**/test_*.py` below src. Returns "
    "paths relative to the workspace root, one per line, sorted by path, at most 100 (the last line "
    "says when there are more: narrow the pattern or path). Skips .git, files ignored by .gitignore "
    "and symlinks. Use this instead of find or ls in bash; use grep to search file contents.";

bool has_glob_chars(std::string_view text) { return text.find_first_of("*?[{\\") != std::string_view::npos; }

struct Request {
  std::filesystem::path start;
  std::string pattern;
};

ToolResult run_glob(const Request& request, const Workspace& workspace, const llm::CancelScope& cancel) {
  struct stat st {};
  if (::stat(request.start.c_str(), &st) != 0) return files::open_failure(errno, workspace.display(request.start));
  if (!S_ISDIR(st.st_mode)) {
    return ToolResult::failure("NOT_A_DIRECTORY", workspace.display(request.start) + " is not a directory");
  }
  const files::GlobSet glob(request.pattern);
  std::vector<std::string> found;
  files::WalkOptions options;
  options.workspace = &workspace;
  options.cancel = &cancel;
  options.enter_dir = [&glob](std::string_view rel_dir) { return glob.could_match_below(rel_dir); };
  const std::function<bool(const files::WalkEntry&)> visit = [&](const files::WalkEntry& entry) {
    if (glob.matches(entry.rel_path)) found.emplace_back(entry.rel_path);
    return found.size() < max_collected;
  };
  std::string error;
  const files::WalkStatus status = files::walk_files(request.start, options, visit, error);
  if (status == files::WalkStatus::cancelled) return files::cancelled_result();
  if (status == files::WalkStatus::failed) return ToolResult::failure("IO_ERROR", error);

  ToolResult result;
  const std::string shown_start = workspace.display(request.start);
  if (found.empty()) {
    result.text = "No files match " + request.pattern + " under " + shown_start;
    result.meta["count"] = 0;
    return result;
  }
  std::sort(found.begin(), found.end());
  const std::size_t shown = std::min(found.size(), max_results);
  for (std::size_t i = 0; i < shown; ++i) {
    result.text += workspace.display(request.start / found[i]);
    result.text += '\n';
  }
  if (found.size() > shown) {
    result.text += "[showing " + std::to_string(shown) + " of " +
                   (status == files::WalkStatus::stopped ? "more than " : "") + std::to_string(found.size()) +
                   " files; narrow the pattern or path]\n";
  }
  result.meta["count"] = found.size();
  result.meta["truncated"] = found.size() > shown;
  return result;
}

class GlobTool final : public Tool {
 public:
  GlobTool()
      : schema_(json::parse(R"json({
          "type": "object",
          "properties": {
            "pattern": {"type": "string", "description": "The glob, relative to path, e.g. **/*.ts or src/**/*.{h,cpp}"},
            "path": {"type": "string", "description": "The directory to search (default: the workspace root)"}
          },
          "required": ["pattern"]
        })json").as_object()) {}

  std::string_view name() const override { return "glob"; }
  std::string_view description() const override { return description_text; }
  const json::object& input_schema() const override { return schema_; }
  bool read_only() const override { return true; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    std::string error;
    const std::optional<std::string> pattern = files::string_arg(args, "pattern", error);
    const std::optional<std::string> path = files::string_arg(args, "path", error);
    if (!error.empty()) co_return files::invalid_arguments(error);
    if (!pattern) co_return files::invalid_arguments("pattern is required");
    if (pattern->empty()) co_return files::invalid_arguments("pattern must not be empty");

    // An absolute pattern (or one with literal leading directories) is
    // split: its literal directories join `path`, the rest is the glob.
    std::string base = path.value_or(".");
    std::string glob = *pattern;
    if (glob.front() == '/') {
      base = "/";
      glob.erase(0, 1);
    }
    while (glob.rfind("./", 0) == 0) glob.erase(0, 2);
    for (std::size_t slash = glob.find('/'); slash != std::string::npos; slash = glob.find('/')) {
      const std::string head = glob.substr(0, slash);
      if (has_glob_chars(head) || head == "..") break;
      base += "/" + head;
      glob.erase(0, slash + 1);
    }
    if (glob.empty()) co_return files::invalid_arguments("pattern names a directory, not files: add e.g. /**/*");

    Request request;
    if (auto refused = files::resolve_path(context.workspace, base, request.start)) co_return std::move(*refused);
    request.pattern = std::move(glob);
    const Workspace& workspace = context.workspace;
    const llm::CancelScope& cancel = context.cancel;
    std::function<ToolResult()> work = [&request, &workspace, &cancel] { return run_glob(request, workspace, cancel); };
    ToolResult result = co_await context.pool.run(std::move(work));
    co_return result;
  }

 private:
  json::object schema_;
};

}  // namespace glob_tool

std::unique_ptr<Tool> make_glob_tool() { return std::make_unique<glob_tool::GlobTool>(); }

}  // namespace harnessd::tools
