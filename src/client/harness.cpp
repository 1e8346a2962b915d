// Harness::run: subscribe first, then prompt, so no notification of the turn
// can be missed; the response's frame index cuts off anything that arrived
// after it.
#include "harnessd/client/harness.hpp"

#include <memory>

namespace harnessd::client {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr std::string_view prompt_method = "session/prompt";

const json::object* object_field(const json::object& obj, std::string_view key) {
  const json::value* v = obj.if_contains(key);
  return v != nullptr ? v->if_object() : nullptr;
}

const json::string* string_field(const json::object& obj, std::string_view key) {
  const json::value* v = obj.if_contains(key);
  return v != nullptr ? v->if_string() : nullptr;
}

/// Filled by the subscription on the client's executor, read by run() there.
struct Collector {
  std::vector<Notification> notifications;
  NotificationHandler forward;
};

}  // namespace

std::string final_response_of(std::span<const json::object> events) {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    const json::string* type = string_field(*it, "type");
    if (type == nullptr || *type != "assistant/message") continue;
    std::string text;
    const json::object* data = object_field(*it, "data");
    const json::value* content = data != nullptr ? data->if_contains("content") : nullptr;
    if (content != nullptr && content->is_array()) {
      for (const json::value& block : content->get_array()) {
        const json::object* b = block.if_object();
        if (b == nullptr) continue;
        const json::string* block_type = string_field(*b, "type");
        const json::string* block_text = string_field(*b, "text");
        if (block_type != nullptr && *block_type == "text" && block_text != nullptr) text += *block_text;
      }
    }
    return text;
  }
  return {};
}

std::optional<std::string_view> text_delta_of(const Notification& notification, std::string_view session_id) {
  if (notification.method != "session.event") return std::nullopt;
  const json::string* sid = string_field(notification.params, "sessionId");
  if (sid == nullptr || *sid != session_id) return std::nullopt;
  const json::object* event = object_field(notification.params, "event");
  const json::string* type = event != nullptr ? string_field(*event, "type") : nullptr;
  if (type == nullptr || *type != "assistant/chunk") return std::nullopt;
  const json::object* data = object_field(*event, "data");
  const json::object* chunk = data != nullptr ? object_field(*data, "chunk") : nullptr;
  const json::string* chunk_type = chunk != nullptr ? string_field(*chunk, "type") : nullptr;
  if (chunk_type == nullptr || *chunk_type != "text-delta") return std::nullopt;
  const json::string* text = string_field(*chunk, "text");
  if (text == nullptr) return std::nullopt;
  return std::string_view(*text);
}

asio::awaitable<TurnResult> Harness::run(std::string session_id, std::string input,
                                         NotificationHandler on_notification) {
  auto collector = std::make_shared<Collector>();
  collector->forward = std::move(on_notification);
  Subscription subscription = client_.subscribe(session_id, [collector](const Notification& n) {
    collector->notifications.push_back(n);
    if (collector->forward) collector->forward(n);
  });

  json::object block{{"type", "text"}, {"text", std::move(input)}};
  json::value params = json::object{{"sessionId", session_id}, {"contentBlocks", json::array{block}}};
  std::string method(prompt_method);
  Response response = co_await client_.call(std::move(method), std::move(params));
  subscription.reset();
  if (response.error) throw RpcError(response.error->code, response.error->message, response.error->data, response.raw);
  SessionPromptResponse outcome = parse_session_prompt_result(response.result);

  TurnResult result;
  result.session_id = session_id;
  result.status = std::move(outcome.status);
  result.reason = std::move(outcome.reason);
  result.raw_response = std::move(response.raw);
  for (Notification& n : collector->notifications) {
    if (n.frame_index > response.frame_index) break;
    if (n.method == "session.event") {
      const json::string* sid = string_field(n.params, "sessionId");
      const json::object* event = object_field(n.params, "event");
      if (sid != nullptr && *sid == session_id && event != nullptr) result.events.push_back(*event);
    }
    result.notifications.push_back(std::move(n));
  }
  result.final_response = final_response_of(result.events);
  co_return result;
}

}  // namespace harnessd::client
