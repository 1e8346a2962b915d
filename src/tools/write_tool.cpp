// The `write` tool (AGENT.md §2): creates or replaces a whole file,
// atomically and never through a symlink, and only over a version of the
// file this session has read. meta.diff shows clients what changed.
#include "llm/cancel_scope.hpp"
#include "tools/builtin.hpp"
#include "tools/file_util.hpp"
#include "tools/read_tracker.hpp"
#include "tools/tool_pool.hpp"
#include "tools/unified_diff.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <functional>

namespace harnessd::tools {
namespace write_tool {

namespace asio = boost::asio;
namespace json = boost::json;

/// meta.diff larger than this is dropped (meta.diffOmitted) to keep events small.
constexpr std::size_t max_diff_bytes = 1 << 20;

constexpr std::string_view description_text =
    "Writes a whole file of the workspace, creating it and its parent directories when missing. "
    "`file_path` is absolute or relative to the workspace; `content` is the complete new content. "
    "To change part of an existing file prefer edit, which sends only the changed text. Overwriting "
    "an existing file requires that you read it first in this session and that it has not changed "
    "since (FS_NOT_OBSERVED: read it; FS_STALE: it changed, read it again). Fails with "
    "SANDBOX_READ_ONLY in a read-only session.";

std::size_t count_lines(std::string_view text) {
  if (text.empty()) return 0;
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + (text.back() == '\n' ? 0 : 1);
}

class WriteTool final : public Tool {
 public:
  WriteTool()
      : schema_(json::parse(R"json({
          "type": "object",
          "properties": {
            "file_path": {"type": "string", "description": "The file to write: absolute, or relative to the workspace"},
            "content": {"type": "string", "description": "The complete content of the file"}
          },
          "required": ["file_path", "content"]
        })json").as_object()) {}

  std::string_view name() const override { return "write"; }
  std::string_view description() const override { return description_text; }
  const json::object& input_schema() const override { return schema_; }
  std::string_view guidance() const override {
    return "Use write for new files or whole rewrites; read an existing file first. Prefer edit for small changes.";
  }
  bool read_only() const override { return false; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    std::string error;
    const std::optional<std::string> file_path = files::string_arg(args, "file_path", error);
    const std::optional<std::string> content = files::string_arg(args, "content", error);
    if (!error.empty()) co_return files::invalid_arguments(error);
    if (!file_path) co_return files::invalid_arguments("file_path is required");
    if (!content) co_return files::invalid_arguments("content is required");
    if (context.sandbox == SandboxMode::read_only) {
      co_return ToolResult::failure("SANDBOX_READ_ONLY", "this session's sandbox is read-only: files cannot be written");
    }
    std::filesystem::path path;
    if (auto refused = files::resolve_path(context.workspace, *file_path, path)) co_return std::move(*refused);
    const std::string shown = context.workspace.display(path);

    // 1. The file as it is now (pool), 2. the read-before-write rule
    // (strand: the tracker is the session's), 3. the write (pool), which
    // fails if the file changed in between.
    files::Existing before;
    std::function<ToolResult()> load = [&path, &shown, &before] {
      ToolResult result;
      if (auto failed = files::load_for_change(path, shown, false, before)) result = std::move(*failed);
      return result;
    };
    ToolResult loaded = co_await context.pool.run(std::move(load));
    if (loaded.error) co_return loaded;
    if (before.exists) {
      const ReadTracker::Check check = context.reads.check(path, before.stamp);
      if (check == ReadTracker::Check::not_observed) {
        co_return ToolResult::failure("FS_NOT_OBSERVED",
                                      shown + " exists and was not read in this session; read it before overwriting it");
      }
      if (check == ReadTracker::Check::stale) {
        co_return ToolResult::failure("FS_STALE", shown + " changed since it was last read; read it again");
      }
    }

    std::optional<FileStamp> written;
    std::function<ToolResult()> store = [&path, &shown, &before, &content, &written] {
      FileStamp stamp;
      if (before.exists && before.content == *content) {
        written = before.stamp;
        ToolResult same;
        same.text = shown + " is unchanged (the content is the same)";
        return same;
      }
      if (auto failed = files::replace_file(path, *content, before, shown, stamp)) return std::move(*failed);
      written = stamp;
      const std::string old_label = before.exists ? files::diff_label(shown, 'a') : std::string("/dev/null");
      UnifiedDiff diff = unified_diff(before.content, *content, old_label, files::diff_label(shown, 'b'));
      ToolResult result;
      if (before.exists) {
        result.text = "Updated " + shown + " (+" + std::to_string(diff.added) + " -" + std::to_string(diff.removed) +
                      " lines, " + std::to_string(content->size()) + " bytes)";
      } else {
        result.text = "Created " + shown + " (" + std::to_string(count_lines(*content)) + " lines, " +
                      std::to_string(content->size()) + " bytes)";
      }
      result.meta["path"] = shown;
      result.meta["created"] = !before.exists;
      if (diff.text.size() <= max_diff_bytes) {
        result.meta["diff"] = diff.text;
      } else {
        result.meta["diffOmitted"] = true;
      }
      return result;
    };
    ToolResult result = co_await context.pool.run(std::move(store));
    if (written) context.reads.record(path, *written);
    co_return result;
  }

 private:
  json::object schema_;
};

}  // namespace write_tool

std::unique_ptr<Tool> make_write_tool() { return std::make_unique<write_tool::WriteTool>(); }

}  // namespace harnessd::tools
