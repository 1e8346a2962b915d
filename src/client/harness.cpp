// Harness::run: subscribe first, then prompt, so no notification of the turn
// can be missed; the response's frame index cuts off anything that arrived
// after it.
#include "harnessd/client/harness.hpp"

#include "harnessd/protocol/notifications.hpp"

#include <memory>

namespace harnessd::client {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

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
  if (notification.method != protocol::session_event_method) return std::nullopt;
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

  protocol::PromptParams prompt{.session_id = session_id};
  prompt.content_blocks.emplace_back(json::object{{"type", "text"}, {"text", std::move(input)}});
  json::value params = json::value_from(prompt);
  std::string method(protocol::name_of(protocol::Method::session_prompt));
  Response response = co_await client_.call(std::move(method), std::move(params));
  subscription.reset();
  if (response.error) throw RpcError(response.error->code, response.error->message, response.error->data, response.raw);
  const auto outcome = read_result<protocol::PromptResult>(response.result, protocol::name_of(protocol::Method::session_prompt));

  TurnResult result;
  result.session_id = session_id;
  result.status = std::string(protocol::to_string(outcome.status));
  result.reason = json::value_from(outcome.reason).as_object();
  result.raw_response = std::move(response.raw);
  for (Notification& n : collector->notifications) {
    if (n.frame_index > response.frame_index) break;
    if (n.method == protocol::session_event_method) {
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
