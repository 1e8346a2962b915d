#include "llm/scripted_provider.hpp"

#include "util/utf8.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <charconv>
#include <cstdio>
#include <chrono>

namespace harnessd::llm {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// Generous limits that still keep one prompt from exhausting memory.
constexpr std::int64_t max_chunk_count = 10'000'000;
constexpr std::size_t max_chunk_bytes = 1 << 20;
constexpr std::int64_t max_total_bytes = std::int64_t{256} << 20;
constexpr std::int64_t max_delay_ms = 600'000;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool parse_int(std::string_view s, std::int64_t& out) {
  s = trim(s);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

Script invalid(std::string why) {
  Script s;
  s.action = Script::Action::invalid;
  s.text = std::move(why);
  return s;
}

}  // namespace

Script parse_script(std::string_view user_text) {
  Script script;
  bool has_action = false;
  std::string plain;
  std::size_t pos = 0;
  while (pos <= user_text.size()) {
    std::size_t end = user_text.find('\n', pos);
    if (end == std::string_view::npos) end = user_text.size();
    const std::string_view raw = user_text.substr(pos, end - pos);
    pos = end + 1;
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() != '@') {
      if (!plain.empty()) plain += '\n';
      plain += raw;
      continue;
    }
    const std::size_t space = line.find(' ');
    const std::string_view name = line.substr(0, space);
    const std::string_view arg = space == std::string_view::npos ? "" : trim(line.substr(space + 1));
    if (name == "@delay") {
      if (!parse_int(arg, script.delay_ms) || script.delay_ms < 0 || script.delay_ms > max_delay_ms) {
        return invalid("@delay expects milliseconds between 0 and 600000");
      }
      continue;
    }
    if (name == "@tool") {
      // Several @tool lines are several calls of one step.
      if (has_action && script.action != Script::Action::tools) continue;
      const std::size_t sep = arg.find(' ');
      const std::string_view tool = arg.substr(0, sep);
      const std::string_view json_text = sep == std::string_view::npos ? std::string_view("{}") : trim(arg.substr(sep));
      json::error_code ec;
      const json::value parsed = json::parse(json_text, ec);
      if (tool.empty() || ec || !parsed.is_object()) return invalid("@tool expects NAME and a JSON object");
      has_action = true;
      script.action = Script::Action::tools;
      script.tool_calls.push_back(Script::ToolCall{std::string(tool), std::string(json_text)});
      continue;
    }
    if (has_action) continue;  // the first action directive wins
    has_action = true;
    if (name == "@reply") {
      script.action = Script::Action::reply;
      script.text = std::string(arg);
    } else if (name == "@chunks") {
      const std::size_t sep = arg.find(' ');
      std::int64_t count = 0, bytes = 0;
      if (sep == std::string_view::npos || !parse_int(arg.substr(0, sep), count) ||
          !parse_int(arg.substr(sep + 1), bytes)) {
        return invalid("@chunks expects two integers: N BYTES");
      }
      if (count < 1 || count > max_chunk_count || bytes < 1 ||
          bytes > static_cast<std::int64_t>(max_chunk_bytes) || count * bytes > max_total_bytes) {
        return invalid("@chunks N BYTES is out of range (1..10000000 chunks, 1..1048576 bytes, 256 MiB in all)");
      }
      script.action = Script::Action::chunks;
      script.chunk_count = count;
      script.chunk_bytes = static_cast<std::size_t>(bytes);
    } else if (name == "@subagent") {
      script.action = Script::Action::subagent;
      script.text = std::string(arg);
    } else if (name == "@error") {
      script.action = Script::Action::error;
      script.text = arg.empty() ? std::string("scripted error") : std::string(arg);
    } else if (name == "@max-tokens") {
      script.action = Script::Action::max_tokens;
    } else if (name == "@context") {
      script.action = Script::Action::context;
    } else {
      return invalid("unknown directive " + std::string(name));
    }
  }
  if (!has_action) script.text = "echo: " + plain;
  return script;
}

std::string scripted_chunk_text(std::int64_t i, std::size_t bytes) {
  return std::string(bytes, static_cast<char>('a' + i % 26));
}

namespace {

/// Waits `ms` unless the turn is cancelled first; returns false if cancelled.
/// What the sink holds goes out before the wait.
asio::awaitable<bool> cancellable_delay(std::int64_t ms, CancelScope& cancel, ChunkSink& sink) {
  if (cancel.cancelled()) co_return false;
  if (ms <= 0) co_return true;
  co_await sink.flush();
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(ms));
  CancelScope::Hook hook(cancel, [&timer] { timer.cancel(); });
  // The flush may have waited (a commit): a cancel meanwhile found no hook.
  if (cancel.cancelled()) co_return false;
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return !cancel.cancelled();
}

const ChatMessage* last_with_role(const std::vector<ChatMessage>& messages, ChatMessage::Role role) {
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if (it->role == role) return &*it;
  }
  return nullptr;
}

/// "NAME said: TEXT" for each tool result at the end of the conversation,
/// in call order, joined by newlines.
std::string tool_report(const std::vector<ChatMessage>& messages) {
  std::size_t first = messages.size();
  while (first > 0 && messages[first - 1].role == ChatMessage::Role::tool) --first;
  const ChatMessage* asked = first > 0 ? &messages[first - 1] : nullptr;
  std::string report;
  for (std::size_t i = first; i < messages.size(); ++i) {
    std::string name = "tool";
    if (asked != nullptr) {
      for (const ToolCall& call : asked->tool_calls) {
        if (call.id == messages[i].tool_call_id) name = call.name;
      }
    }
    if (!report.empty()) report += '\n';
    report += name + " said: " + messages[i].text;
  }
  return report;
}

/// "context: N messages, fnv1a64 HEX": what the model was sent, so tests can
/// tell two requests' conversations apart without seeing them.
std::string context_digest(const std::vector<ChatMessage>& messages) {
  std::uint64_t hash = 14695981039346656037ull;
  const auto mix = [&hash](std::string_view bytes) {
    for (const char c : bytes) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ull;
    }
    hash ^= 0xff;  // a separator no UTF-8 text contains
    hash *= 1099511628211ull;
  };
  for (const ChatMessage& m : messages) {
    mix(m.role == ChatMessage::Role::user ? "user" : m.role == ChatMessage::Role::assistant ? "assistant" : "tool");
    mix(m.text);
    mix(m.reasoning);
    for (const ToolCall& call : m.tool_calls) {
      mix(call.id);
      mix(call.name);
      mix(call.arguments);
    }
    mix(m.tool_call_id);
    mix(m.is_error ? "error" : "ok");
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return "context: " + std::to_string(messages.size()) + " messages, fnv1a64 " + hex;
}

// Chunks reach the sink as named locals, moved: GCC 12 rule 4 (README).
asio::awaitable<ModelResult> stream_text(std::string_view text, std::int64_t delay_ms,
                                         ChunkSink& sink, CancelScope& cancel,
                                         protocol::ChunkFinish finish_reason) {
  protocol::Chunk start = protocol::BlockStart{0, protocol::BlockType::text};
  co_await sink.on_chunk(std::move(start));
  if (const bool waited = co_await cancellable_delay(delay_ms, cancel, sink); !waited) {
    co_return ModelResult{FinishReason::cancelled};
  }
  // Prompt text is valid UTF-8 already (it came as JSON); repaired anyway,
  // as every provider's text is.
  protocol::Chunk delta = protocol::TextDelta{0, util::valid_utf8(text)};
  co_await sink.on_chunk(std::move(delta));
  protocol::Chunk end = protocol::BlockEnd{0};
  co_await sink.on_chunk(std::move(end));
  protocol::Chunk finish = protocol::FinishChunk{finish_reason};
  co_await sink.on_chunk(std::move(finish));
  co_return ModelResult{finish_reason == protocol::ChunkFinish::length ? FinishReason::length : FinishReason::stop};
}

}  // namespace

asio::awaitable<ModelResult> ScriptedProvider::stream(const ModelRequest& request, ChunkSink& sink,
                                                      CancelScope& cancel) {
  const auto& messages = *request.messages;
  // A model has a window: a request past it fails as a real endpoint's does,
  // and the turn compacts the conversation and tries again.
  if (const std::int64_t tokens = estimate_tokens(messages); tokens > request.context_window) {
    std::string message = "the request needs about " + std::to_string(tokens) + " tokens; the context window is " +
                          std::to_string(request.context_window);
    co_return error_result(std::move(message), errc::context_window_exceeded);
  }
  if (request.purpose == RequestPurpose::compaction) {
    // The last message is the request to summarize; the rest is summarized.
    const std::string summary = "scripted summary of " + std::to_string(messages.empty() ? 0 : messages.size() - 1) +
                                " messages";
    ModelResult result = co_await stream_text(summary, 0, sink, cancel, protocol::ChunkFinish::stop);
    co_return result;
  }
  // After tools ran, the model's next step reports what each call said.
  if (!messages.empty() && messages.back().role == ChatMessage::Role::tool) {
    {
      const std::string answer = tool_report(messages);
      ModelResult result = co_await stream_text(answer, 0, sink, cancel, protocol::ChunkFinish::stop);
      co_return result;
    }
  }
  const ChatMessage* user = last_with_role(messages, ChatMessage::Role::user);
  const Script script = parse_script(user ? std::string_view(user->text) : std::string_view());

  switch (script.action) {
    case Script::Action::invalid:
      co_return error_result(script.text, errc::invalid_directive);
    case Script::Action::error:
      if (const bool waited = co_await cancellable_delay(script.delay_ms, cancel, sink); !waited) {
      co_return ModelResult{FinishReason::cancelled};
    }
      co_return error_result(script.text, errc::scripted);
    case Script::Action::max_tokens:
      {
      ModelResult result =
          co_await stream_text("partial", script.delay_ms, sink, cancel, protocol::ChunkFinish::length);
      co_return result;
    }
    case Script::Action::context: {
      const std::string digest = context_digest(messages);
      ModelResult result = co_await stream_text(digest, 0, sink, cancel, protocol::ChunkFinish::stop);
      co_return result;
    }
    case Script::Action::echo:
    case Script::Action::reply:
      {
      ModelResult result =
          co_await stream_text(script.text, script.delay_ms, sink, cancel, protocol::ChunkFinish::stop);
      co_return result;
    }
    case Script::Action::subagent: {
      json::object args;
      args["description"] = "scripted subagent";
      args["prompt"] = util::valid_utf8(script.text);
      protocol::Chunk start = protocol::BlockStart{0, protocol::BlockType::tool_call};
      co_await sink.on_chunk(std::move(start));
      if (const bool waited = co_await cancellable_delay(script.delay_ms, cancel, sink); !waited) {
        co_return ModelResult{FinishReason::cancelled};
      }
      protocol::Chunk call = protocol::ToolCallDelta{0, "call_0", "subagent", json::serialize(args)};
      co_await sink.on_chunk(std::move(call));
      protocol::Chunk end = protocol::BlockEnd{0};
      co_await sink.on_chunk(std::move(end));
      protocol::Chunk finish = protocol::FinishChunk{protocol::ChunkFinish::tool_calls};
      co_await sink.on_chunk(std::move(finish));
      co_return ModelResult{FinishReason::tool_calls};
    }
    case Script::Action::tools: {
      if (const bool waited = co_await cancellable_delay(script.delay_ms, cancel, sink); !waited) {
        co_return ModelResult{FinishReason::cancelled};
      }
      for (std::size_t i = 0; i < script.tool_calls.size(); ++i) {
        const int index = static_cast<int>(i);
        protocol::Chunk start = protocol::BlockStart{index, protocol::BlockType::tool_call};
        co_await sink.on_chunk(std::move(start));
        protocol::Chunk call = protocol::ToolCallDelta{index, "call_" + std::to_string(i), script.tool_calls[i].name,
                                                       script.tool_calls[i].arguments};
        co_await sink.on_chunk(std::move(call));
        protocol::Chunk end = protocol::BlockEnd{index};
        co_await sink.on_chunk(std::move(end));
      }
      protocol::Chunk finish = protocol::FinishChunk{protocol::ChunkFinish::tool_calls};
      co_await sink.on_chunk(std::move(finish));
      co_return ModelResult{FinishReason::tool_calls};
    }
    case Script::Action::chunks:
      break;
  }

  protocol::Chunk start = protocol::BlockStart{0, protocol::BlockType::text};
  co_await sink.on_chunk(std::move(start));
  for (std::int64_t i = 0; i < script.chunk_count; ++i) {
    if (const bool waited = co_await cancellable_delay(script.delay_ms, cancel, sink); !waited) {
      co_return ModelResult{FinishReason::cancelled};
    }
    protocol::Chunk delta = protocol::TextDelta{0, scripted_chunk_text(i, script.chunk_bytes)};
    co_await sink.on_chunk(std::move(delta));
  }
  protocol::Chunk end = protocol::BlockEnd{0};
  co_await sink.on_chunk(std::move(end));
  protocol::Chunk finish = protocol::FinishChunk{protocol::ChunkFinish::stop};
  co_await sink.on_chunk(std::move(finish));
  co_return ModelResult{FinishReason::stop};
}

}  // namespace harnessd::llm
