#include "harnessd/harness/session.hpp"

#include "detail/turn.hpp"
#include "harnessd/harness/session_registry.hpp"
#include "harnessd/harness/turn_status.hpp"
#include "harnessd/util/json_fields.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <charconv>
#include <chrono>
#include <iterator>

namespace harnessd::harness {
namespace json = boost::json;
using llm::ChatMessage;

namespace {

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::int64_t int_field(const json::object& obj, std::string_view key, std::int64_t fallback) {
  const json::value* v = obj.if_contains(key);
  if (v == nullptr) return fallback;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  return fallback;
}

/// Concatenates the `text` of blocks of one type.
std::string text_of(const json::value* blocks, std::string_view type) {
  std::string out;
  if (blocks == nullptr || !blocks->is_array()) return out;
  for (const json::value& block : blocks->get_array()) {
    if (!block.is_object()) continue;
    const json::object& b = block.get_object();
    if (util::string_field(b, "type") == type) out += util::string_field(b, "text");
  }
  return out;
}

}  // namespace

Session::Session(Strand strand, std::string id, SessionRegistry& registry,
                 std::optional<std::string> parent_id, int delegation_depth)
    : strand_(std::move(strand)),
      id_(std::move(id)),
      registry_(registry),
      parent_id_(std::move(parent_id)),
      delegation_depth_(delegation_depth) {}

boost::asio::awaitable<PromptOutcome> Session::prompt(PromptInput input, EventSink& sink) {
  if (busy_) {
    registry_.stats().overlap_rejections.fetch_add(1, std::memory_order_relaxed);
    co_return PromptOutcome{.busy = true};
  }
  busy_ = true;
  llm::CancelScope scope;
  struct Release {
    Session& session;
    ~Release() {
      session.busy_ = false;
      session.running_ = nullptr;
      session.running_owner_ = nullptr;
    }
  } release{*this};
  running_ = &scope;
  running_owner_ = input.owner;
  if (!log_) load(input.cwd);
  // Not `co_return co_await`: GCC 12 then skips the destructors of this
  // frame's locals (Release above), leaving the session marked busy.
  PromptOutcome outcome = co_await detail::run_turn(*this, input, sink, scope);
  co_return outcome;
}

bool Session::cancel(const std::string& why, const void* owner) {
  if (running_ == nullptr || (owner != nullptr && owner != running_owner_)) return false;
  running_->cancel(why);
  return true;
}

namespace {
// A plain function, not a capturing lambda: GCC 12 mishandles the captures
// of lambda coroutines.
boost::asio::awaitable<bool> cancel_on_strand(std::shared_ptr<Session> session, std::string why,
                                              const void* owner) {
  co_return session->cancel(why, owner);
}
}  // namespace

boost::asio::awaitable<bool> Session::cancel_from_anywhere(std::shared_ptr<Session> session,
                                                           std::string why, const void* owner) {
  auto strand = session->strand();
  bool cancelled = co_await boost::asio::co_spawn(
      strand, cancel_on_strand(std::move(session), std::move(why), owner), boost::asio::use_awaitable);
  co_return cancelled;
}

void Session::load(const std::optional<std::string>& cwd) {
  store::SessionHeader header;
  header.id = id_;
  header.created_at_ms = now_ms();
  header.cwd = cwd;
  header.parent_session = parent_id_;
  header.delegation_depth = delegation_depth_;
  auto log = registry_.store().open(header);
  // A child prompted directly after a restart keeps its place in the tree.
  if (const json::value* depth = log->header().if_contains("delegationDepth"); depth && depth->is_int64()) {
    delegation_depth_ = static_cast<int>(depth->get_int64());
  }

  std::optional<std::int64_t> open_turn;  // a turn/start without its turn/end
  for (json::object& event : log->take_loaded_events()) {
    const std::string_view type = util::string_field(event, "type");
    next_seq_ = static_cast<std::uint64_t>(int_field(event, "seq", -1) + 1);
    const json::value* data = event.if_contains("data");
    if (data == nullptr || !data->is_object()) continue;
    const json::object& d = data->get_object();
    if (type == "turn/start") {
      open_turn = int_field(d, "turn", next_turn_);
      next_turn_ = *open_turn + 1;
    } else if (type == "turn/end") {
      open_turn.reset();
    }
    apply_to_conversation(type, d);
  }
  log_ = std::move(log);
  if (open_turn) {
    // The daemon stopped inside this turn: close it so every turn has an end.
    json::object data;
    data["turn"] = *open_turn;
    data["reason"] = turn_end::interrupted();
    append_event("turn/end", std::move(data));
    sync_log();
  }
}

std::string Session::append_event(std::string_view type, json::object data) {
  apply_to_conversation(type, data);
  const std::string data_json = json::serialize(data);
  return append_serialized_event(type, data_json);
}

std::string Session::append_serialized_event(std::string_view type, std::string_view data_json) {
  // Written by hand: one allocation instead of a JSON object per event.
  // `type` is one of the protocol's event names and needs no escaping; the
  // key order is part of the documented log format.
  char numbers[2][24];
  const auto seq_end = std::to_chars(std::begin(numbers[0]), std::end(numbers[0]), next_seq_++).ptr;
  const auto time_end = std::to_chars(std::begin(numbers[1]), std::end(numbers[1]), now_ms()).ptr;
  std::string event;
  event.reserve(48 + type.size() + data_json.size());
  event += R"({"type":")";
  event += type;
  event += R"(","seq":)";
  event.append(numbers[0], seq_end);
  event += R"(,"time":)";
  event.append(numbers[1], time_end);
  event += R"(,"data":)";
  event += data_json;
  event += '}';
  log_->append(event);
  return event;
}

void Session::sync_log() { log_->sync(); }

void Session::apply_to_conversation(std::string_view type, const json::object& data) {
  if (type == "user/message") {
    messages_.push_back(ChatMessage{.role = ChatMessage::Role::user,
                                    .text = text_of(data.if_contains("content"), "text")});
  } else if (type == "assistant/message") {
    ChatMessage message{.role = ChatMessage::Role::assistant};
    const json::value* content = data.if_contains("content");
    message.text = text_of(content, "text");
    message.reasoning = text_of(content, "reasoning");
    if (content != nullptr && content->is_array()) {
      for (const json::value& block : content->get_array()) {
        if (!block.is_object() || util::string_field(block.get_object(), "type") != "tool-call") continue;
        const json::object& b = block.get_object();
        message.tool_calls.push_back({std::string(util::string_field(b, "id")),
                                      std::string(util::string_field(b, "name")),
                                      std::string(util::string_field(b, "arguments"))});
      }
    }
    messages_.push_back(std::move(message));
  } else if (type == "tool/result") {
    const json::value* is_error = data.if_contains("isError");
    messages_.push_back(ChatMessage{.role = ChatMessage::Role::tool,
                                    .text = text_of(data.if_contains("content"), "text"),
                                    .tool_call_id = std::string(util::string_field(data, "callId")),
                                    .is_error = is_error != nullptr && is_error->is_bool() &&
                                                is_error->get_bool()});
  }
}

}  // namespace harnessd::harness
