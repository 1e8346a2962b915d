// The `edit` tool (AGENT.md §2): replaces an exact string of a file the
// session has read, once (it must be unique) or everywhere, writing the
// file atomically like `write`; meta.diff shows clients the change.
#include "llm/cancel_scope.hpp"
#include "tools/builtin.hpp"
#include "tools/file_util.hpp"
#include "tools/read_tracker.hpp"
#include "tools/tool_pool.hpp"
#include "tools/unified_diff.hpp"

#include <boost/json/parse.hpp>

#include <functional>

namespace harnessd::tools {
namespace edit_tool {

namespace asio = boost::asio;
namespace json = boost::json;

constexpr std::size_t max_diff_bytes = 1 << 20;

constexpr std::string_view description_text =
    "Replaces text in a file of the workspace: `old_string` (exact text of the file, whitespace and "
    "indentation included, without read's line-number prefixes) becomes `new_string`. Read the file "
    "first in this session (FS_NOT_OBSERVED otherwise; FS_STALE when it changed since: read it "
    "again). `old_string` must occur exactly once (NO_MATCH: it is not there; AMBIGUOUS_MATCH: it "
    "occurs several times, so include more surrounding lines to make it unique), or set "
    "`replace_all` to true to replace every occurrence (e.g. to rename a variable). Prefer edit over "
    "write for changes to existing files; use write to create files.";

std::size_t count_occurrences(std::string_view text, std::string_view needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

std::string replace_occurrences(std::string_view text, std::string_view from, std::string_view to, bool all) {
  std::string out;
  out.reserve(text.size() + (to.size() > from.size() ? to.size() - from.size() : 0));
  std::size_t start = 0;
  for (std::size_t at = text.find(from); at != std::string_view::npos; at = text.find(from, start)) {
    out.append(text.substr(start, at - start));
    out.append(to);
    start = at + from.size();
    if (!all) break;
  }
  out.append(text.substr(start));
  return out;
}

std::string with_crlf(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' && (i == 0 || text[i - 1] != '\r')) out += '\r';
    out += text[i];
  }
  return out;
}

struct Request {
  std::filesystem::path path;
  std::string shown;
  std::string old_string;
  std::string new_string;
  bool replace_all = false;
};

ToolResult apply_edit(const Request& request, const files::Existing& before, std::optional<FileStamp>& written) {
  std::string_view from = request.old_string;
  std::string_view to = request.new_string;
  std::size_t count = count_occurrences(before.content, from);
  // The model sees CRLF files without their '\r': match the text it saw.
  std::string crlf_from;
  std::string crlf_to;
  if (count == 0 && from.find('\n') != std::string_view::npos &&
      before.content.find("\r\n") != std::string::npos) {
    crlf_from = with_crlf(from);
    crlf_to = with_crlf(to);
    count = count_occurrences(before.content, crlf_from);
    if (count > 0) {
      from = crlf_from;
      to = crlf_to;
    }
  }
  if (count == 0) {
    return ToolResult::failure("NO_MATCH", "old_string was not found in " + request.shown +
                                               "; read the file again and copy the text exactly (whitespace "
                                               "included, without the line-number prefixes)");
  }
  if (count > 1 && !request.replace_all) {
    ToolResult result = ToolResult::failure(
        "AMBIGUOUS_MATCH", "old_string matches " + std::to_string(count) + " times in " + request.shown +
                               "; include more surrounding lines to make it unique, or set replace_all to "
                               "replace every occurrence");
    result.meta["matches"] = count;
    return result;
  }
  const std::string after = replace_occurrences(before.content, from, to, request.replace_all);
  FileStamp stamp;
  if (auto failed = files::replace_file(request.path, after, before, request.shown, stamp)) return std::move(*failed);
  written = stamp;
  const UnifiedDiff diff =
      unified_diff(before.content, after, files::diff_label(request.shown, 'a'), files::diff_label(request.shown, 'b'));
  ToolResult result;
  result.text = "Edited " + request.shown + ": " + std::to_string(count) +
                (count == 1 ? " replacement" : " replacements") + " (+" + std::to_string(diff.added) + " -" +
                std::to_string(diff.removed) + " lines)";
  result.meta["path"] = request.shown;
  result.meta["replacements"] = count;
  if (diff.text.size() <= max_diff_bytes) {
    result.meta["diff"] = diff.text;
  } else {
    result.meta["diffOmitted"] = true;
  }
  return result;
}

class EditTool final : public Tool {
 public:
  EditTool()
      : schema_(json::parse(R"json({
          "type": "object",
          "properties": {
            "file_path": {"type": "string", "description": "The file to change: absolute, or relative to the workspace"},
            "old_string": {"type": "string", "description": "The exact text to replace; unique in the file unless replace_all"},
            "new_string": {"type": "string", "description": "The text to put in its place (different from old_string)"},
            "replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence of old_string"}
          },
          "required": ["file_path", "old_string", "new_string"]
        })json").as_object()) {}

  std::string_view name() const override { return "edit"; }
  std::string_view description() const override { return description_text; }
  const json::object& input_schema() const override { return schema_; }
  std::string_view guidance() const override {
    return "Read a file before you edit it, and make old_string long enough to match exactly once.";
  }
  bool read_only() const override { return false; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    std::string error;
    const std::optional<std::string> file_path = files::string_arg(args, "file_path", error);
    std::optional<std::string> old_string = files::string_arg(args, "old_string", error);
    std::optional<std::string> new_string = files::string_arg(args, "new_string", error);
    const std::optional<bool> replace_all = files::bool_arg(args, "replace_all", error);
    if (!error.empty()) co_return files::invalid_arguments(error);
    if (!file_path) co_return files::invalid_arguments("file_path is required");
    if (!old_string) co_return files::invalid_arguments("old_string is required");
    if (!new_string) co_return files::invalid_arguments("new_string is required");
    if (old_string->empty()) {
      co_return files::invalid_arguments("old_string must not be empty; use write to create a file");
    }
    if (*old_string == *new_string) {
      co_return files::invalid_arguments("old_string and new_string are the same; nothing would change");
    }
    if (context.sandbox == SandboxMode::read_only) {
      co_return ToolResult::failure("SANDBOX_READ_ONLY", "this session's sandbox is read-only: files cannot be edited");
    }
    Request request;
    if (auto refused = files::resolve_path(context.workspace, *file_path, request.path)) co_return std::move(*refused);
    request.shown = context.workspace.display(request.path);
    request.old_string = std::move(*old_string);
    request.new_string = std::move(*new_string);
    request.replace_all = replace_all.value_or(false);

    files::Existing before;
    std::function<ToolResult()> load = [&request, &before] {
      ToolResult result;
      if (auto failed = files::load_for_change(request.path, request.shown, true, before)) result = std::move(*failed);
      return result;
    };
    ToolResult loaded = co_await context.pool.run(std::move(load));
    if (loaded.error) co_return loaded;
    const ReadTracker::Check check = context.reads.check(request.path, before.stamp);
    if (check == ReadTracker::Check::not_observed) {
      co_return ToolResult::failure("FS_NOT_OBSERVED",
                                    request.shown + " was not read in this session; read it before editing it");
    }
    if (check == ReadTracker::Check::stale) {
      co_return ToolResult::failure("FS_STALE", request.shown + " changed since it was last read; read it again");
    }

    std::optional<FileStamp> written;
    std::function<ToolResult()> work = [&request, &before, &written] { return apply_edit(request, before, written); };
    ToolResult result = co_await context.pool.run(std::move(work));
    if (written) context.reads.record(request.path, *written);
    co_return result;
  }

 private:
  json::object schema_;
};

}  // namespace edit_tool

std::unique_ptr<Tool> make_edit_tool() { return std::make_unique<edit_tool::EditTool>(); }

}  // namespace harnessd::tools
