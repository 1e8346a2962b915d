// MCP tool names and result mapping: what the model is offered and what it
// reads back from a server, byte for byte.
#include "mcp/content.hpp"
#include "mcp/tool_name.hpp"
#include "tools/registry.hpp"

#include <boost/json/parse.hpp>
#include <doctest/doctest.h>

#include <string>

using namespace harnessd;
namespace json = boost::json;

namespace {

tools::ToolResult map(std::string_view result_json, std::size_t max = 1 << 20) {
  return mcp::to_tool_result(json::parse(result_json).as_object(), max);
}

}  // namespace

TEST_CASE("mcp tool names: prefix, sanitized parts, 64 bytes") {
  CHECK(mcp::tool_name("everything", "echo") == "mcp__everything__echo");
  CHECK(mcp::tool_name("every thing", "get-tiny-image") == "mcp__every_thing__get-tiny-image");
  CHECK(mcp::tool_name("fs", "read.file/v2") == "mcp__fs__read_file_v2");
  // One '_' per character, however many bytes it has.
  CHECK(mcp::tool_name("srv", "caf\xC3\xA9\xF0\x9F\x98\x80") == "mcp__srv__caf__");
  CHECK(mcp::sanitize_name_part("") == "");
  const std::string long_name = mcp::tool_name("server", std::string(100, 'x'));
  CHECK(long_name.size() == 64);
  CHECK(long_name.starts_with("mcp__server__xxx"));
}

TEST_CASE("mcp content: text, image, audio, resources, links") {
  CHECK(map(R"({"content":[{"type":"text","text":"hello"}]})").text == "hello");
  // "aGVsbG8=" is "hello": 5 bytes; "YWI" is "ab" without padding.
  const tools::ToolResult image =
      map(R"({"content":[{"type":"text","text":"look"},{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}]})");
  CHECK(image.text == "look\n[image: image/png, 5 bytes]");
  CHECK_FALSE(image.error);
  CHECK(map(R"({"content":[{"type":"audio","data":"YWI","mimeType":"audio/wav"}]})").text ==
        "[audio: audio/wav, 2 bytes]");
  CHECK(map(R"({"content":[{"type":"resource","resource":{"uri":"file:///a","text":"inside"}}]})").text == "inside");
  CHECK(map(R"({"content":[{"type":"resource","resource":{"uri":"file:///b","blob":"AAAA"}}]})").text ==
        "[resource: file:///b]");
  CHECK(map(R"({"content":[{"type":"resource_link","uri":"test://x","name":"x"}]})").text == "[resource: test://x]");
  CHECK(map(R"({"content":[{"type":"hologram"}]})").text == "[hologram content]");
  CHECK(map(R"({"content":"not a list"})").text == "");
}

TEST_CASE("mcp content: structuredContent only without text content") {
  CHECK(map(R"({"content":[],"structuredContent":{"sum":3}})").text == R"({"sum":3})");
  CHECK(map(R"({"structuredContent":[1,2]})").text == "[1,2]");
  CHECK(map(R"({"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}})").text == "3");
}

TEST_CASE("mcp content: isError becomes MCP_TOOL_ERROR with the text") {
  const tools::ToolResult failed = map(R"({"content":[{"type":"text","text":"no such file"}],"isError":true})");
  REQUIRE(failed.error);
  CHECK(failed.error->code == "MCP_TOOL_ERROR");
  CHECK(failed.text == "no such file");
  const tools::ToolResult silent = map(R"({"content":[],"isError":true})");
  REQUIRE(silent.error);
  CHECK(silent.text == "the MCP tool failed");
  CHECK_FALSE(map(R"({"content":[],"isError":false})").error);
}

TEST_CASE("mcp content: long text is cut on a character boundary and says so") {
  json::object result;
  json::array content;
  content.push_back(json::object{{"type", "text"}, {"text", std::string(10, 'a') + "\xC3\xA9" + "tail"}});
  result["content"] = std::move(content);
  const tools::ToolResult cut = mcp::to_tool_result(result, 11);
  CHECK(cut.text == std::string(10, 'a') + "\n[cut: 6 more bytes of the MCP tool's result]");
}

TEST_CASE("mcp content: base64 sizes") {
  CHECK(mcp::base64_decoded_size("") == 0);
  CHECK(mcp::base64_decoded_size("AAAA") == 3);
  CHECK(mcp::base64_decoded_size("AAAAAA==") == 4);
  CHECK(mcp::base64_decoded_size("AAAA\nAAA=") == 5);
}

namespace {

class NamedTool final : public tools::Tool {
 public:
  NamedTool(std::string name, std::string source) : name_(std::move(name)), source_(std::move(source)) {}
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return ""; }
  const json::object& input_schema() const override { return schema_; }
  bool read_only() const override { return true; }
  std::string_view source() const override { return source_; }
  boost::asio::awaitable<tools::ToolResult> run(const json::object&, tools::ToolContext&) override {
    co_return tools::ToolResult{};
  }

 private:
  std::string name_;
  std::string source_;
  json::object schema_;
};

std::vector<std::string> names(const tools::ToolRegistry& registry) {
  std::vector<std::string> out;
  for (const auto& tool : registry.all()) out.emplace_back(tool->name());
  return out;
}

}  // namespace

TEST_CASE("tool registry: a source's tools are replaced in place, held tools stay alive") {
  tools::ToolRegistry registry;
  registry.add(std::make_shared<NamedTool>("read", "builtin"));
  registry.replace_source("mcp:a", {std::make_shared<NamedTool>("mcp__a__x", "mcp:a")});
  registry.add(std::make_shared<NamedTool>("grep", "builtin"));
  const std::shared_ptr<tools::Tool> held = registry.find("mcp__a__x");
  REQUIRE(held);
  const auto skipped = registry.replace_source(
      "mcp:a", {std::make_shared<NamedTool>("mcp__a__y", "mcp:a"), std::make_shared<NamedTool>("read", "mcp:a")});
  CHECK(skipped == std::vector<std::string>{"read"});
  CHECK(names(registry) == std::vector<std::string>{"read", "mcp__a__y", "grep"});
  CHECK_FALSE(registry.find("mcp__a__x"));
  CHECK(held->name() == "mcp__a__x");
  registry.replace_source("mcp:a", {});
  CHECK(names(registry) == std::vector<std::string>{"read", "grep"});
}

TEST_CASE("tool registry: the specs offered to the model are shared until the tools change") {
  const auto spec_names = [](const auto& specs) {
    std::vector<std::string> out;
    for (const auto& spec : *specs) out.push_back(spec.name);
    return out;
  };
  tools::ToolRegistry registry;
  registry.add(std::make_shared<NamedTool>("read", "builtin"));
  const auto first = registry.specs(true);
  CHECK(registry.specs(true) == first);  // one snapshot, not a copy per request
  CHECK(spec_names(first) == std::vector<std::string>{"read"});

  registry.replace_source("mcp:a", {std::make_shared<NamedTool>("mcp__a__x", "mcp:a")});
  const auto second = registry.specs(true);
  CHECK(spec_names(second) == std::vector<std::string>{"read", "mcp__a__x"});
  CHECK(spec_names(first) == std::vector<std::string>{"read"});  // a request in flight keeps its own
  registry.add(std::make_shared<NamedTool>("grep", "builtin"));
  CHECK(spec_names(registry.specs(true)) == std::vector<std::string>{"read", "mcp__a__x", "grep"});
  registry.replace_source("mcp:a", {});
  CHECK(spec_names(registry.specs(false)) == std::vector<std::string>{"read", "grep"});
}
