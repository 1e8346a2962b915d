// Request bodies and streamed chunks of the OpenAI-compatible format. Provider
// data is untrusted: parsed with the input nesting limit, non-finite numbers
// replaced, usage reduced to the finite numbers the protocol documents.
#include "llm/openai_format.hpp"

#include "util/json_fields.hpp"
#include "util/json_limits.hpp"
#include "util/utf8.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

namespace harnessd::llm::openai {
namespace json = boost::json;

namespace {

json::object tool_call_json(const ToolCall& call) {
  return json::object{{"id", call.id},
                      {"type", "function"},
                      {"function", json::object{{"name", call.name}, {"arguments", call.arguments}}}};
}

/// A usage count as the protocol carries it: an integer or a finite number.
bool is_usage_number(const json::value& v) {
  return v.is_int64() || v.is_uint64() || (v.is_double() && std::isfinite(v.get_double()));
}

}  // namespace

std::size_t replace_non_finite(json::value& value) {
  // An explicit stack: the function must not depend on the depth the value
  // was parsed with.
  std::size_t replaced = 0;
  std::vector<json::value*> pending{&value};
  while (!pending.empty()) {
    json::value* v = pending.back();
    pending.pop_back();
    switch (v->kind()) {
      case json::kind::double_:
        if (!std::isfinite(v->get_double())) {
          *v = nullptr;
          ++replaced;
        }
        break;
      case json::kind::array:
        for (json::value& item : v->get_array()) pending.push_back(&item);
        break;
      case json::kind::object:
        for (auto& member : v->get_object()) pending.push_back(&member.value());
        break;
      default:
        break;
    }
  }
  return replaced;
}

json::object build_request_body(const ModelRequest& request) {
  const std::string_view system_prompt = request.system_prompt;
  const std::vector<ChatMessage>& history = *request.messages;
  // Tool calls without a result (a turn cancelled mid-tool) would make the
  // API refuse the whole conversation: only answered calls are sent.
  std::set<std::string> answered;
  for (const ChatMessage& m : history) {
    if (m.role == ChatMessage::Role::tool) answered.insert(m.tool_call_id);
  }

  json::array messages;
  if (!system_prompt.empty()) messages.push_back(json::object{{"role", "system"}, {"content", system_prompt}});
  bool instructions_sent = request.instructions.empty();
  for (const ChatMessage& m : history) {
    if (!instructions_sent && m.role == ChatMessage::Role::user) {
      // Ahead of the first user message (and merged into it below).
      messages.push_back(json::object{{"role", "user"}, {"content", request.instructions}});
      instructions_sent = true;
    }
    switch (m.role) {
      case ChatMessage::Role::user: {
        // Consecutive user messages (after an aborted turn) are merged.
        if (!messages.empty() && messages.back().as_object().at("role") == "user") {
          json::string& content = messages.back().as_object()["content"].as_string();
          content.append("\n\n");
          content.append(m.text);
        } else {
          messages.push_back(json::object{{"role", "user"}, {"content", m.text}});
        }
        break;
      }
      case ChatMessage::Role::assistant: {
        json::object message{{"role", "assistant"}};
        json::array calls;
        for (const ToolCall& call : m.tool_calls) {
          if (answered.contains(call.id)) calls.push_back(tool_call_json(call));
        }
        if (m.text.empty() && calls.empty()) break;  // nothing a model can use
        message["content"] = m.text.empty() ? json::value(nullptr) : json::value(m.text);
        // Thinking mode needs a tool-calling step's reasoning back; on other
        // steps it is dropped (the endpoint ignores it there).
        if (!calls.empty() && !m.reasoning.empty()) message["reasoning_content"] = m.reasoning;
        if (!calls.empty()) message["tool_calls"] = std::move(calls);
        messages.push_back(std::move(message));
        break;
      }
      case ChatMessage::Role::tool:
        messages.push_back(json::object{{"role", "tool"}, {"tool_call_id", m.tool_call_id}, {"content", m.text}});
        break;
    }
  }

  json::object body{{"model", request.model},
                    {"messages", std::move(messages)},
                    {"stream", true},
                    {"stream_options", json::object{{"include_usage", true}}}};
  const ModelSettings& settings = request.settings;
  if (settings.thinking) body["thinking"] = json::object{{"type", *settings.thinking ? "enabled" : "disabled"}};
  if (settings.reasoning_effort) body["reasoning_effort"] = *settings.reasoning_effort;
  if (settings.temperature) body["temperature"] = *settings.temperature;
  if (request.max_tokens) body["max_tokens"] = *request.max_tokens;
  if (!settings.stop.empty()) body["stop"] = json::array(settings.stop.begin(), settings.stop.end());
  if (request.tools && !request.tools->empty()) {
    json::array tools;
    for (const ToolSpec& tool : *request.tools) {
      tools.push_back(json::object{{"type", "function"},
                                   {"function", json::object{{"name", tool.name},
                                                             {"description", tool.description},
                                                             {"parameters", tool.parameters}}}});
    }
    body["tools"] = std::move(tools);
  }
  return body;
}

int StreamDecoder::block_for(std::string_view kind, int tool_index, protocol::BlockType block_type,
                             std::vector<protocol::Chunk>& chunks) {
  for (const OpenBlock& b : blocks_) {
    if (b.kind == kind && b.tool_index == tool_index) return b.index;
  }
  const int index = static_cast<int>(blocks_.size());
  blocks_.push_back(OpenBlock{std::string(kind), tool_index, index});
  chunks.emplace_back(protocol::BlockStart{index, block_type});
  return index;
}

bool StreamDecoder::on_data(std::string_view data, std::vector<protocol::Chunk>& chunks) {
  if (data == "[DONE]") {
    done_ = true;
    return false;
  }
  json::error_code ec;
  json::value parsed = json::parse(data, ec, {}, util::input_parse_options());
  if (ec == json::error::too_deep) {
    throw std::runtime_error("the model stream sent a chunk nested deeper than " +
                             std::to_string(util::input_max_depth) + " levels");
  }
  if (ec || !parsed.is_object()) throw std::runtime_error("the model stream sent a malformed chunk");
  // The whole chunk, not only usage: whatever field is forwarded later
  // cannot carry Infinity/NaN.
  replace_non_finite(parsed);
  received_any_ = true;
  const json::object& chunk = parsed.get_object();
  if (const json::value* usage = chunk.if_contains("usage"); usage != nullptr && usage->is_object()) {
    const json::object& u = usage->get_object();
    json::object mapped;
    // Only numbers are copied: anything else (null, strings, nested arrays)
    // is a provider bug and would only bloat every logged usage chunk.
    const auto copy = [&mapped](const json::object& from, std::string_view key, std::string_view to) {
      if (const json::value* v = from.if_contains(key); v != nullptr && is_usage_number(*v)) mapped[to] = *v;
    };
    copy(u, "prompt_tokens", "inputTokens");
    copy(u, "completion_tokens", "outputTokens");
    copy(u, "total_tokens", "totalTokens");
    if (auto* details = u.if_contains("completion_tokens_details"); details && details->is_object()) {
      copy(details->get_object(), "reasoning_tokens", "reasoningTokens");
    }
    // Tokens read from the endpoint's cache: DeepSeek's field, else OpenAI's.
    copy(u, "prompt_cache_hit_tokens", "cacheReadTokens");
    if (auto* details = u.if_contains("prompt_tokens_details"); details && details->is_object() &&
                                                                !mapped.contains("cacheReadTokens")) {
      copy(details->get_object(), "cached_tokens", "cacheReadTokens");
    }
    // inputTokens counts what was not read from the cache, as upstream's
    // usage does; inputTokens + cacheReadTokens is the whole prompt.
    if (const json::value* cached = mapped.if_contains("cacheReadTokens"); cached && cached->is_int64()) {
      if (json::value* input = mapped.if_contains("inputTokens"); input && input->is_int64()) {
        *input = std::max<std::int64_t>(0, input->get_int64() - cached->get_int64());
      }
    }
    if (!mapped.empty()) usage_ = std::move(mapped);
  }
  const json::value* choices = chunk.if_contains("choices");
  if (choices == nullptr || !choices->is_array() || choices->get_array().empty()) return true;
  const json::value& first = choices->get_array().front();
  if (!first.is_object()) return true;
  const json::object& choice = first.get_object();
  if (const json::value* delta = choice.if_contains("delta"); delta != nullptr && delta->is_object()) {
    const json::object& d = delta->get_object();
    if (auto text = util::string_field(d, "reasoning_content"); !text.empty()) {
      const int index = block_for("reasoning", -1, protocol::BlockType::reasoning, chunks);
      chunks.emplace_back(protocol::ReasoningDelta{index, std::string(text)});
    }
    if (auto text = util::string_field(d, "content"); !text.empty()) {
      const int index = block_for("text", -1, protocol::BlockType::text, chunks);
      chunks.emplace_back(protocol::TextDelta{index, std::string(text)});
    }
    if (const json::value* calls = d.if_contains("tool_calls"); calls != nullptr && calls->is_array()) {
      for (const json::value& call_value : calls->get_array()) {
        if (!call_value.is_object()) continue;
        const json::object& call = call_value.get_object();
        const json::value* i = call.if_contains("index");
        const int tool_index = i != nullptr && i->is_int64() ? static_cast<int>(i->get_int64()) : 0;
        std::string_view name, arguments;
        if (const json::value* fn = call.if_contains("function"); fn != nullptr && fn->is_object()) {
          name = util::string_field(fn->get_object(), "name");
          arguments = util::string_field(fn->get_object(), "arguments");
        }
        const int index = block_for("tool", tool_index, protocol::BlockType::tool_call, chunks);
        chunks.emplace_back(protocol::ToolCallDelta{index, std::string(util::string_field(call, "id")),
                                                    std::string(name), std::string(arguments)});
      }
    }
  }
  if (const json::value* reason = choice.if_contains("finish_reason"); reason != nullptr && reason->is_string()) {
    finish_reason_ = std::string(reason->get_string());
  }
  return true;
}

void StreamDecoder::finish(std::vector<protocol::Chunk>& chunks) {
  for (const OpenBlock& b : blocks_) chunks.emplace_back(protocol::BlockEnd{b.index});
  if (usage_) chunks.emplace_back(protocol::UsageChunk{*usage_});
  const std::string reason = finish_reason_.value_or("stop");
  const auto mapped = map_finish_reason(reason);
  using protocol::ChunkFinish;
  chunks.emplace_back(protocol::FinishChunk{!mapped                               ? ChunkFinish::error
                                            : *mapped == FinishReason::tool_calls ? ChunkFinish::tool_calls
                                            : *mapped == FinishReason::length     ? ChunkFinish::length
                                                                                  : ChunkFinish::stop});
}

std::string error_detail(std::string_view body, std::size_t max_raw_bytes) {
  json::error_code ec;
  json::value parsed = json::parse(body, ec, {}, util::input_parse_options());
  if (!ec && parsed.is_object()) {
    // Boost.JSON checks UTF-8 while parsing: these strings are valid.
    if (const json::value* error = parsed.get_object().if_contains("error")) {
      if (error->is_object()) {
        if (const json::value* m = error->get_object().if_contains("message"); m && m->is_string()) {
          return std::string(m->get_string());
        }
      }
      if (error->is_string()) return std::string(error->get_string());
    }
  }
  // Anything else: an HTML page, plain text in any encoding, a body cut at
  // the read limit mid-character. Repaired first, then cut between
  // characters, so a cut character never becomes a U+FFFD of its own.
  std::string text = util::valid_utf8(body.substr(0, max_raw_bytes + 3));
  text.resize(util::cut_utf8(text, max_raw_bytes).size());
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

std::optional<FinishReason> map_finish_reason(std::string_view reason) {
  if (reason == "stop") return FinishReason::stop;
  if (reason == "tool_calls") return FinishReason::tool_calls;
  if (reason == "length") return FinishReason::length;
  return std::nullopt;
}

}  // namespace harnessd::llm::openai
