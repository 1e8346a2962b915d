#include "mcp/mcp_tool.hpp"

#include "mcp/client.hpp"
#include "mcp/tool_name.hpp"
#include "tools/tool_context.hpp"
#include "util/utf8.hpp"

#include <boost/json/value.hpp>

#include <string>

namespace harnessd::mcp {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr std::size_t max_description_bytes = 16 * 1024;

class McpTool final : public tools::Tool {
 public:
  McpTool(std::shared_ptr<Client> client, std::string remote_name, std::string description, json::object schema,
          bool read_only)
      : client_(std::move(client)),
        name_(tool_name(client_->name(), remote_name)),
        remote_name_(std::move(remote_name)),
        description_(std::move(description)),
        schema_(std::move(schema)),
        read_only_(read_only) {}

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  const json::object& input_schema() const override { return schema_; }
  bool read_only() const override { return read_only_; }
  std::string_view source() const override { return client_->source(); }

  asio::awaitable<tools::ToolResult> run(const json::object& args, tools::ToolContext& context) override {
    std::string tool = remote_name_;
    json::object arguments = args;
    tools::ToolResult result = co_await client_->call(std::move(tool), std::move(arguments), context.cancel);
    co_return result;
  }

 private:
  std::shared_ptr<Client> client_;  ///< the client outlives every call of its tools
  std::string name_;
  std::string remote_name_;
  std::string description_;
  json::object schema_;
  bool read_only_;
};

}  // namespace

std::shared_ptr<tools::Tool> make_mcp_tool(std::shared_ptr<Client> client, const json::object& entry) {
  const json::value* name = entry.if_contains("name");
  if (name == nullptr || !name->is_string() || name->get_string().empty()) return nullptr;
  std::string description;
  if (const json::value* d = entry.if_contains("description"); d != nullptr && d->is_string()) {
    description = util::valid_utf8(d->get_string());
    // Sent to the model on every step: a server cannot fill its context.
    if (description.size() > max_description_bytes) {
      description.resize(util::cut_utf8(description, max_description_bytes).size());
    }
  }
  // A model API wants an object schema; a server that sends none gets the
  // schema of "any arguments".
  json::object schema;
  if (const json::value* s = entry.if_contains("inputSchema"); s != nullptr && s->is_object()) {
    schema = s->get_object();
  } else {
    schema = json::object{{"type", "object"}};
  }
  bool read_only = false;
  if (const json::value* a = entry.if_contains("annotations"); a != nullptr && a->is_object()) {
    if (const json::value* hint = a->get_object().if_contains("readOnlyHint"); hint != nullptr && hint->is_bool()) {
      read_only = hint->get_bool();
    }
  }
  return std::make_shared<McpTool>(std::move(client), std::string(name->get_string()), std::move(description),
                                   std::move(schema), read_only);
}

}  // namespace harnessd::mcp
