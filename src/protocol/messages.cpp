#include "harnessd/protocol/messages.hpp"

#include "harnessd/rpc/error_code.hpp"

#include <boost/json/object.hpp>

namespace harnessd::protocol {
namespace json = boost::json;
using rpc::ErrorCode;
using rpc::RpcError;

namespace {

[[noreturn]] void bad(std::string message) {
  throw RpcError(ErrorCode::invalid_params, std::move(message));
}

/// Params must be an object; absent params read as an empty object.
const json::object& params_object(const json::value& params) {
  static const json::object empty;
  if (params.is_null()) return empty;
  if (!params.is_object()) bad("params must be an object");
  return params.get_object();
}

std::optional<std::string> optional_string(const json::object& obj, std::string_view field) {
  const json::value* v = obj.if_contains(field);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string()) bad("params." + std::string(field) + " must be a string");
  return std::string(v->get_string());
}

std::optional<std::int64_t> optional_int(const json::object& obj, std::string_view field) {
  const json::value* v = obj.if_contains(field);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= INT64_MAX) return static_cast<std::int64_t>(v->get_uint64());
  bad("params." + std::string(field) + " must be an integer");
}

std::string session_id(const json::object& obj) {
  const json::value* v = obj.if_contains("sessionId");
  if (v == nullptr) bad("params.sessionId is required");
  if (!v->is_string()) bad("params.sessionId must be a string");
  const json::string& id = v->get_string();
  if (id.empty()) bad("params.sessionId must not be empty");
  if (id.size() > max_session_id_bytes) bad("params.sessionId must be at most 256 bytes");
  return std::string(id);
}

}  // namespace

InitializeParams tag_invoke(json::value_to_tag<InitializeParams>, const json::value& params) {
  const json::object& obj = params_object(params);
  InitializeParams out;
  out.cwd = optional_string(obj, "cwd");
  if (out.cwd && out.cwd->empty()) bad("params.cwd must not be empty");
  out.provider = optional_string(obj, "provider");
  out.model = optional_string(obj, "model");
  if (out.model && out.model->empty()) bad("params.model must not be empty");
  out.max_tokens = optional_int(obj, "maxTokens");
  if (out.max_tokens && *out.max_tokens <= 0) bad("params.maxTokens must be a positive integer");
  out.protocol_version = optional_int(obj, "protocolVersion");
  out.auth_token = optional_string(obj, "authToken");
  if (const json::value* info = obj.if_contains("clientInfo"); info && !info->is_null() && !info->is_object()) {
    bad("params.clientInfo must be an object");
  }
  return out;
}

PromptParams tag_invoke(json::value_to_tag<PromptParams>, const json::value& params) {
  const json::object& obj = params_object(params);
  PromptParams out;
  out.session_id = session_id(obj);
  const json::value* blocks = obj.if_contains("contentBlocks");
  if (blocks == nullptr) bad("params.contentBlocks is required");
  if (!blocks->is_array()) bad("params.contentBlocks must be an array");
  if (blocks->get_array().empty()) bad("params.contentBlocks must not be empty");
  std::size_t i = 0;
  for (const json::value& block : blocks->get_array()) {
    const std::string where = "params.contentBlocks[" + std::to_string(i++) + "]";
    if (!block.is_object()) bad(where + " must be an object");
    const json::object& b = block.get_object();
    const json::value* type = b.if_contains("type");
    if (type == nullptr || !type->is_string()) bad(where + ".type must be a string");
    if (type->get_string() != "text") {
      bad(where + ".type \"" + std::string(type->get_string()) + "\" is not supported (v1 accepts \"text\")");
    }
    const json::value* text = b.if_contains("text");
    if (text == nullptr || !text->is_string()) bad(where + ".text must be a string");
    out.content_blocks.push_back(json::object{{"type", "text"}, {"text", text->get_string()}});
  }
  return out;
}

CancelParams tag_invoke(json::value_to_tag<CancelParams>, const json::value& params) {
  return CancelParams{session_id(params_object(params))};
}

ShutdownParams tag_invoke(json::value_to_tag<ShutdownParams>, const json::value&) {
  return {};  // shutdown ignores whatever params it is sent
}

void tag_invoke(json::value_from_tag, json::value& out, const InitializeResult& result) {
  json::array providers(result.providers.begin(), result.providers.end());
  json::array methods(result.methods.begin(), result.methods.end());
  out = json::object{
      {"serverInfo", json::object{{"name", result.server_name},
                                  {"version", result.version},
                                  {"implementation", result.implementation}}},
      {"protocolVersion", result.protocol_version},
      {"capabilities", json::object{{"providers", std::move(providers)}, {"methods", std::move(methods)}}}};
}

void tag_invoke(json::value_from_tag, json::value& out, const PromptResult& result) {
  out = json::object{{"status", to_string(result.status)}, {"reason", json::value_from(result.reason)}};
}

void tag_invoke(json::value_from_tag, json::value& out, const CancelResult& result) {
  out = json::object{{"cancelled", result.cancelled}};
}

void tag_invoke(json::value_from_tag, json::value& out, const ShutdownResult&) { out = json::object{}; }

}  // namespace harnessd::protocol
