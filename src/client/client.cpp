// The client's connection state: a pending-request table keyed by the ids we
// generate, one reader coroutine that classifies every incoming frame and one
// writer coroutine that batches outgoing requests. All of it is confined to
// the client's executor.
#include "harnessd/client/client.hpp"

#include "util/wakeup.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <atomic>
#include <deque>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace harnessd::client {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// GCC 12: names and frames are built in named locals, never as temporaries
// inside a co_await expression.
constexpr std::string_view initialize_method = "initialize";
constexpr std::string_view prompt_method = "session/prompt";
constexpr std::string_view cancel_method = "session/cancel";
constexpr std::string_view approve_method = "session/approve";
constexpr std::string_view answer_method = "session/answer";
constexpr std::string_view shutdown_method = "shutdown";
constexpr std::string_view list_method = "session/list";
constexpr std::string_view events_method = "session/events";
constexpr std::string_view subscribe_method = "session/subscribe";
constexpr std::string_view unsubscribe_method = "session/unsubscribe";
constexpr std::string_view tools_list_method = "tools/list";

const json::string* string_field(const json::object& obj, std::string_view key) {
  const json::value* v = obj.if_contains(key);
  return v != nullptr && v->is_string() ? &v->get_string() : nullptr;
}

std::optional<std::int64_t> our_id(const json::value& id) {
  if (id.is_int64()) return id.get_int64();
  if (id.is_uint64() && id.get_uint64() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return static_cast<std::int64_t>(id.get_uint64());
  }
  return std::nullopt;  // strings, null, ...: never an id we generated
}

std::string excerpt(std::string_view frame) {
  constexpr std::size_t max = 200;
  return frame.size() <= max ? std::string(frame) : std::string(frame.substr(0, max)) + "...";
}

const json::object& result_object(const json::value& result, std::string_view method) {
  if (!result.is_object()) {
    throw ProtocolError(std::string(method) + " result is not an object: " + excerpt(json::serialize(result)));
  }
  return result.get_object();
}

/// An integer field (a double such as 1.0 is not one); throws ProtocolError.
std::int64_t int_field(const json::object& obj, std::string_view key, std::string_view what,
                       const json::value& whole) {
  const json::value* v = obj.if_contains(key);
  if (v != nullptr && v->is_int64()) return v->get_int64();
  if (v != nullptr && v->is_uint64() &&
      v->get_uint64() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return static_cast<std::int64_t>(v->get_uint64());
  }
  throw ProtocolError(std::string(what) + " has no integer " + std::string(key) + ": " +
                      excerpt(json::serialize(whole)));
}

bool bool_field(const json::object& obj, std::string_view key, std::string_view what, const json::value& whole) {
  const json::value* v = obj.if_contains(key);
  if (v == nullptr || !v->is_bool()) {
    throw ProtocolError(std::string(what) + " has no boolean " + std::string(key) + ": " +
                        excerpt(json::serialize(whole)));
  }
  return v->get_bool();
}

/// session.event notifications of exactly `session_id`: what a
/// session/subscribe subscription delivers.
NotificationHandler only_events_of(std::string session_id, NotificationHandler handler) {
  return [session_id = std::move(session_id), handler = std::move(handler)](const Notification& n) {
    if (n.method != "session.event") return;
    const json::string* sid = string_field(n.params, "sessionId");
    if (sid == nullptr || *sid != session_id) return;
    handler(n);
  };
}

}  // namespace

bool InitializeResult::supports(std::string_view method) const {
  return std::find(methods.begin(), methods.end(), method) != methods.end();
}

SessionList parse_session_list_result(const json::value& result) {
  constexpr std::string_view what = "session/list result";
  const json::object& obj = result_object(result, "session/list");
  const json::value* sessions = obj.if_contains("sessions");
  if (sessions == nullptr || !sessions->is_array()) {
    throw ProtocolError("session/list result has no sessions array: " + excerpt(json::serialize(result)));
  }
  SessionList out;
  out.sessions.reserve(sessions->get_array().size());
  for (const json::value& entry : sessions->get_array()) {
    const json::object* e = entry.if_object();
    const json::string* id = e != nullptr ? string_field(*e, "sessionId") : nullptr;
    if (id == nullptr) {
      throw ProtocolError("session/list entry without a string sessionId: " + excerpt(json::serialize(entry)));
    }
    SessionSummary summary;
    summary.session_id = std::string(*id);
    summary.created_at = int_field(*e, "createdAt", "session/list entry", entry);
    summary.updated_at = int_field(*e, "updatedAt", "session/list entry", entry);
    summary.last_seq = int_field(*e, "lastSeq", "session/list entry", entry);
    summary.turns = int_field(*e, "turns", "session/list entry", entry);
    summary.running = bool_field(*e, "running", "session/list entry", entry);
    if (const json::value* parent = e->if_contains("parentSessionId"); parent != nullptr && !parent->is_null()) {
      if (!parent->is_string()) {
        throw ProtocolError("session/list entry with a parentSessionId that is not a string: " +
                            excerpt(json::serialize(entry)));
      }
      summary.parent_session_id = std::string(parent->get_string());
    }
    summary.raw = *e;
    out.sessions.push_back(std::move(summary));
  }
  if (const json::value* cursor = obj.if_contains("nextCursor"); cursor != nullptr && !cursor->is_null()) {
    if (!cursor->is_string()) {
      throw ProtocolError(std::string(what) + " has a nextCursor that is not a string: " +
                          excerpt(json::serialize(result)));
    }
    out.next_cursor = std::string(cursor->get_string());
  }
  return out;
}

protocol::ToolsListResult parse_tools_list_result(const json::value& result) {
  const json::object& obj = result_object(result, "tools/list");
  const json::value* tools = obj.if_contains("tools");
  if (tools == nullptr || !tools->is_array()) {
    throw ProtocolError("tools/list result has no tools array: " + excerpt(json::serialize(result)));
  }
  protocol::ToolsListResult out;
  out.tools.reserve(tools->get_array().size());
  for (const json::value& entry : tools->get_array()) {
    const json::object* e = entry.if_object();
    const json::string* name = e != nullptr ? string_field(*e, "name") : nullptr;
    const json::value* schema = e != nullptr ? e->if_contains("inputSchema") : nullptr;
    if (name == nullptr || schema == nullptr || !schema->is_object()) {
      throw ProtocolError("tools/list entry without a string name and an inputSchema object: " +
                          excerpt(json::serialize(entry)));
    }
    protocol::ToolInfo tool;
    tool.name = std::string(*name);
    if (const json::string* description = string_field(*e, "description")) tool.description = *description;
    tool.input_schema = schema->get_object();
    tool.read_only = bool_field(*e, "readOnly", "tools/list entry", entry);
    const json::string* source = string_field(*e, "source");
    tool.source = source != nullptr ? std::string(*source) : "builtin";
    out.tools.push_back(std::move(tool));
  }
  return out;
}

SessionEvents parse_session_events_result(const json::value& result) {
  constexpr std::string_view what = "session/events result";
  const json::object& obj = result_object(result, "session/events");
  const json::value* events = obj.if_contains("events");
  if (events == nullptr || !events->is_array()) {
    throw ProtocolError("session/events result has no events array: " + excerpt(json::serialize(result)));
  }
  SessionEvents out;
  out.events.reserve(events->get_array().size());
  for (const json::value& event : events->get_array()) {
    const json::object* e = event.if_object();
    if (e == nullptr || string_field(*e, "type") == nullptr) {
      throw ProtocolError("session/events event is not an object with a string type: " +
                          excerpt(json::serialize(event)));
    }
    int_field(*e, "seq", "session/events event", event);
    out.events.push_back(*e);
  }
  out.last_seq = int_field(obj, "lastSeq", what, result);
  out.more = bool_field(obj, "more", what, result);
  return out;
}

SessionPromptResponse parse_session_prompt_result(const json::value& result) {
  if (!result.is_object()) {
    throw ProtocolError("session/prompt result is not an object: " + excerpt(json::serialize(result)));
  }
  const json::object& obj = result.get_object();
  const json::string* status = string_field(obj, "status");
  if (status == nullptr || (*status != "ok" && *status != "error" && *status != "aborted")) {
    throw ProtocolError("session/prompt result has no valid status (ok, error or aborted): " +
                        excerpt(json::serialize(result)));
  }
  const json::value* reason = obj.if_contains("reason");
  if (reason == nullptr || !reason->is_object() || string_field(reason->get_object(), "kind") == nullptr) {
    throw ProtocolError("session/prompt result has no reason object with a string kind: " +
                        excerpt(json::serialize(result)));
  }
  return SessionPromptResponse{std::string(*status), reason->get_object()};
}

namespace detail {

/// Shared by the Client handle, its reader and writer coroutines and its
/// Subscriptions (weakly). Everything but the atomics is executor-confined.
class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  ClientCore(asio::any_io_executor executor, std::unique_ptr<ClientTransport> transport)
      : executor_(std::move(executor)),
        transport_(std::move(transport)),
        writer_wakeup_(util::Wakeup::create(executor_)),
        state_changed_(util::Wakeup::create(executor_)),
        describe_(transport_->describe()) {}

  void start() {
    asio::co_spawn(executor_, reader(shared_from_this()), asio::detached);
    asio::co_spawn(executor_, writer(shared_from_this()), asio::detached);
  }

  const asio::any_io_executor& executor() const { return executor_; }
  bool closed() const { return closed_.load(); }
  ClientStats stats() const { return stats_; }
  std::uint64_t next_subscription_id() { return next_subscription_.fetch_add(1); }

  asio::awaitable<Response> call(std::string method, json::value params) {
    if (closed_) throw TransportClosed(close_reason_);
    const std::int64_t id = next_id_++;
    auto pending = std::make_shared<Pending>();
    pending->wakeup = util::Wakeup::create(co_await asio::this_coro::executor);
    pending_.emplace(id, pending);

    json::object frame_obj;
    frame_obj["jsonrpc"] = "2.0";
    frame_obj["id"] = id;
    frame_obj["method"] = method;
    if (!params.is_null()) frame_obj["params"] = std::move(params);
    outbox_.push_back(json::serialize(frame_obj));
    writer_wakeup_->notify();

    while (!pending->done) co_await pending->wakeup->wait();
    if (pending->failure) std::rethrow_exception(pending->failure);
    Response response = std::move(pending->response);
    co_return response;
  }

  void add_subscription(std::uint64_t id, std::string session_id, NotificationHandler handler) {
    if (removed_early_.erase(id) > 0) return;  // reset() overtook this add
    auto sub = std::make_shared<Sub>();
    sub->id = id;
    sub->sessions.push_back(std::move(session_id));
    sub->handler = std::move(handler);
    subs_.push_back(std::move(sub));
  }

  void remove_subscription(std::uint64_t id) {
    auto it = std::find_if(subs_.begin(), subs_.end(), [id](const auto& s) { return s->id == id; });
    if (it == subs_.end()) {
      removed_early_.insert(id);
      return;
    }
    (*it)->active = false;
    if (dispatching_) {
      subs_dirty_ = true;  // erased after the running fan-out
    } else {
      subs_.erase(it);
    }
  }

  asio::awaitable<void> close() {
    if (!closing_) {
      closing_ = true;
      std::string why = "connection to " + describe_ + " closed by the client";
      mark_closed(why);
      stop_writer();
      co_await transport_->close();
    }
    while (!reader_done_) co_await state_changed_->wait();
  }

  /// The Client handle is gone: close at once.
  void abandon() {
    asio::dispatch(executor_, [self = shared_from_this()] {
      if (self->closing_) return;
      self->closing_ = true;
      std::string why = "client destroyed";
      self->mark_closed(why);
      self->stop_writer();
      self->transport_->force_close();
    });
  }

 private:
  struct Pending {
    std::shared_ptr<util::Wakeup> wakeup;
    bool done = false;
    Response response;
    std::exception_ptr failure;
  };

  struct Sub {
    std::uint64_t id = 0;
    std::vector<std::string> sessions;  // the subscribed id, then children learned from subagent.started
    NotificationHandler handler;
    bool active = true;

    bool follows(const json::string* id) const {
      return id != nullptr && std::find(sessions.begin(), sessions.end(), std::string_view(*id)) != sessions.end();
    }
  };

  static asio::awaitable<void> reader(std::shared_ptr<ClientCore> self) {
    for (;;) {
      ReadResult read = co_await self->transport_->read_frame();
      if (read.kind == ReadResult::Kind::end) break;
      const std::uint64_t index = self->stats_.frames++;
      if (read.kind == ReadResult::Kind::oversized) {
        ++self->stats_.malformed;
        spdlog::debug("{}: dropped an oversized frame", self->describe_);
        continue;
      }
      self->on_frame(read.frame, index);
    }
    if (!self->closing_) {
      std::string why = co_await self->transport_->end_reason();
      spdlog::debug("{}: {}", self->describe_, why);
      self->mark_closed(why);
      self->stop_writer();
    }
    self->reader_done_ = true;
    self->state_changed_->notify();
  }

  static asio::awaitable<void> writer(std::shared_ptr<ClientCore> self) {
    std::vector<std::string> batch;
    for (;;) {
      while (self->outbox_.empty() && !self->writer_stopped_) co_await self->writer_wakeup_->wait();
      if (self->writer_stopped_) break;
      for (std::string& frame : self->outbox_) batch.push_back(std::move(frame));
      self->outbox_.clear();
      bool failed = false;
      std::string error;
      try {
        co_await self->transport_->write_frames(batch);
      } catch (const std::exception& e) {
        failed = true;
        error = e.what();
      }
      batch.clear();
      if (failed) {
        // The reader sees the end of the connection and fails what is pending.
        spdlog::debug("{}: write failed: {}", self->describe_, error);
        self->transport_->force_close();
        break;
      }
    }
    self->outbox_.clear();
  }

  void stop_writer() {
    writer_stopped_ = true;
    outbox_.clear();
    writer_wakeup_->notify();
  }

  /// Fails every pending request; later calls throw at once.
  void mark_closed(const std::string& why) {
    if (!closed_) close_reason_ = why;
    closed_ = true;
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [id, p] : pending) {
      p->failure = std::make_exception_ptr(TransportClosed(close_reason_));
      p->done = true;
      p->wakeup->notify();
    }
  }

  void on_frame(std::string_view frame, std::uint64_t index) {
    json::error_code ec;
    json::value doc = json::parse(frame, ec);
    if (ec || !doc.is_object()) {
      ++stats_.malformed;
      spdlog::debug("{}: ignored a malformed frame: {}", describe_, excerpt(frame));
      return;
    }
    json::object& obj = doc.get_object();
    const bool has_id = obj.contains("id");
    if (obj.contains("method")) {
      if (has_id) {
        // Directional protocol: a server request is never answered and never
        // resolves one of our waiters, even if its id matches.
        ++stats_.server_requests;
        spdlog::debug("{}: ignored a request frame from the server: {}", describe_, excerpt(frame));
        return;
      }
      on_notification(obj, frame, index);
    } else if (has_id) {
      on_response(obj, frame, index);
    } else {
      ++stats_.malformed;
      spdlog::debug("{}: ignored a frame without id or method: {}", describe_, excerpt(frame));
    }
  }

  void on_notification(json::object& obj, std::string_view frame, std::uint64_t index) {
    const json::string* method = string_field(obj, "method");
    json::value* params = obj.if_contains("params");
    if (method == nullptr || params == nullptr || !params->is_object()) {
      ++stats_.malformed;
      spdlog::debug("{}: ignored a malformed notification: {}", describe_, excerpt(frame));
      return;
    }
    ++stats_.notifications;
    if (subs_.empty()) return;
    const json::object& p = params->get_object();
    const json::string* session = string_field(p, "sessionId");
    const json::string* parent = string_field(p, "parentSessionId");
    const json::string* child = string_field(p, "childSessionId");
    const bool started = *method == "subagent.started";

    std::optional<Notification> note;
    dispatching_ = true;
    // By index: a handler may subscribe (push_back) while we iterate.
    for (std::size_t i = 0; i < subs_.size(); ++i) {
      std::shared_ptr<Sub> sub = subs_[i];
      if (!sub->active) continue;
      if (!sub->follows(session) && !sub->follows(parent) && !sub->follows(child)) continue;
      if (started && child != nullptr && sub->follows(parent) && !sub->follows(child)) {
        sub->sessions.emplace_back(*child);
      }
      if (!note) note = Notification{std::string(*method), p, std::string(frame), index};
      try {
        sub->handler(*note);
      } catch (const std::exception& e) {
        spdlog::warn("{}: a notification handler threw: {}", describe_, e.what());
      }
    }
    dispatching_ = false;
    if (subs_dirty_) {
      subs_dirty_ = false;
      std::erase_if(subs_, [](const auto& s) { return !s->active; });
    }
  }

  void on_response(json::object& obj, std::string_view frame, std::uint64_t index) {
    const std::optional<std::int64_t> id = our_id(obj.at("id"));
    auto it = id ? pending_.find(*id) : pending_.end();
    if (it == pending_.end()) {
      ++stats_.unknown_ids;
      spdlog::debug("{}: ignored a response nobody waits for: {}", describe_, excerpt(frame));
      return;
    }
    std::shared_ptr<Pending> pending = std::move(it->second);
    pending_.erase(it);
    ++stats_.responses;

    json::value* result = obj.if_contains("result");
    json::value* error = obj.if_contains("error");
    if ((result == nullptr) == (error == nullptr)) {
      pending->failure = std::make_exception_ptr(ProtocolError(
          std::string("response to request ") + std::to_string(*id) + " has " +
          (result == nullptr ? "neither result nor error" : "both result and error") + ": " + excerpt(frame)));
    } else if (error != nullptr) {
      const json::object* err = error->if_object();
      const json::value* code = err != nullptr ? err->if_contains("code") : nullptr;
      const json::string* message = err != nullptr ? string_field(*err, "message") : nullptr;
      if (code == nullptr || !code->is_int64() || code->get_int64() < std::numeric_limits<int>::min() ||
          code->get_int64() > std::numeric_limits<int>::max() || message == nullptr) {
        pending->failure = std::make_exception_ptr(
            ProtocolError("error response without an integer code and a string message: " + excerpt(frame)));
      } else {
        Response::Error e;
        e.code = static_cast<int>(code->get_int64());
        e.message = std::string(*message);
        if (const json::value* data = err->if_contains("data")) e.data = *data;
        pending->response.error = std::move(e);
      }
    } else {
      pending->response.result = std::move(*result);
    }
    pending->response.raw = std::string(frame);
    pending->response.frame_index = index;
    pending->done = true;
    pending->wakeup->notify();
  }

  asio::any_io_executor executor_;
  std::unique_ptr<ClientTransport> transport_;
  std::shared_ptr<util::Wakeup> writer_wakeup_;
  std::shared_ptr<util::Wakeup> state_changed_;
  std::string describe_;

  std::int64_t next_id_ = 1;
  std::unordered_map<std::int64_t, std::shared_ptr<Pending>> pending_;
  std::deque<std::string> outbox_;
  std::vector<std::shared_ptr<Sub>> subs_;
  std::unordered_set<std::uint64_t> removed_early_;
  bool dispatching_ = false;
  bool subs_dirty_ = false;
  bool writer_stopped_ = false;
  bool closing_ = false;
  bool reader_done_ = false;
  std::atomic<bool> closed_{false};
  std::string close_reason_;
  std::atomic<std::uint64_t> next_subscription_{1};
  ClientStats stats_;
};

}  // namespace detail

// ---------------------------------------------------------------------------
// Subscription

Subscription::Subscription(Subscription&& other) noexcept
    : core_(std::move(other.core_)), id_(std::exchange(other.id_, 0)) {}

Subscription& Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    reset();
    core_ = std::move(other.core_);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

Subscription::~Subscription() { reset(); }

void Subscription::reset() {
  if (id_ == 0) return;
  if (auto core = core_.lock()) {
    asio::dispatch(core->executor(), [core, id = id_] { core->remove_subscription(id); });
  }
  core_.reset();
  id_ = 0;
}

// ---------------------------------------------------------------------------
// Client

Client::Client(asio::any_io_executor executor, std::unique_ptr<ClientTransport> transport)
    : core_(std::make_shared<detail::ClientCore>(std::move(executor), std::move(transport))) {
  core_->start();
}

Client::Client(Client&&) noexcept = default;

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    if (core_) core_->abandon();
    core_ = std::move(other.core_);
  }
  return *this;
}

Client::~Client() {
  if (core_) core_->abandon();
}

asio::awaitable<Response> Client::call(std::string method, json::value params) {
  Response response = co_await core_->call(std::move(method), std::move(params));
  co_return response;
}

asio::awaitable<json::value> Client::request(std::string method, json::value params) {
  Response response = co_await core_->call(std::move(method), std::move(params));
  if (response.error) {
    throw RpcError(response.error->code, response.error->message, response.error->data, response.raw);
  }
  json::value result = std::move(response.result);
  co_return result;
}

asio::awaitable<InitializeResult> Client::initialize(InitializeOptions options) {
  json::object params;
  if (options.cwd) params["cwd"] = *options.cwd;
  if (options.provider) params["provider"] = *options.provider;
  if (options.model) params["model"] = *options.model;
  if (options.max_tokens) params["maxTokens"] = *options.max_tokens;
  if (options.client_name) {
    json::object info{{"name", *options.client_name}};
    if (options.client_version) info["version"] = *options.client_version;
    params["clientInfo"] = std::move(info);
  }
  if (options.protocol_version) params["protocolVersion"] = *options.protocol_version;
  if (options.auth_token) params["authToken"] = *options.auth_token;
  if (options.on_disconnect) {
    params["onDisconnect"] = *options.on_disconnect == OnDisconnect::continue_running ? "continue" : "cancel";
  }
  if (options.sandbox) params["sandbox"] = *options.sandbox;
  if (options.approval_policy) params["approvalPolicy"] = protocol::to_string(*options.approval_policy);
  std::string method(initialize_method);
  json::value params_value = std::move(params);
  json::value result = co_await request(std::move(method), std::move(params_value));

  const json::object* obj = result.if_object();
  const json::value* info = obj != nullptr ? obj->if_contains("serverInfo") : nullptr;
  if (info == nullptr || !info->is_object() || string_field(info->get_object(), "name") == nullptr) {
    throw ProtocolError("initialize result has no serverInfo.name: " + excerpt(json::serialize(result)));
  }
  InitializeResult out;
  out.server_name = std::string(*string_field(info->get_object(), "name"));
  if (const json::string* version = string_field(info->get_object(), "version")) out.server_version = *version;
  if (const json::value* pv = obj->if_contains("protocolVersion"); pv != nullptr && pv->is_int64()) {
    out.protocol_version = pv->get_int64();
  }
  if (const json::value* caps = obj->if_contains("capabilities"); caps != nullptr && caps->is_object()) {
    if (const json::value* methods = caps->get_object().if_contains("methods"); methods != nullptr &&
                                                                               methods->is_array()) {
      for (const json::value& m : methods->get_array()) {
        if (m.is_string()) out.methods.emplace_back(m.get_string());
      }
    }
  }
  out.raw = *obj;
  co_return out;
}

asio::awaitable<SessionPromptResponse> Client::session_prompt(std::string session_id, std::string text) {
  json::object block{{"type", "text"}, {"text", std::move(text)}};
  json::value params = json::object{{"sessionId", std::move(session_id)}, {"contentBlocks", json::array{block}}};
  std::string method(prompt_method);
  json::value result = co_await request(std::move(method), std::move(params));
  SessionPromptResponse response = parse_session_prompt_result(result);
  co_return response;
}

asio::awaitable<bool> Client::session_cancel(std::string session_id) {
  json::value params = json::object{{"sessionId", std::move(session_id)}};
  std::string method(cancel_method);
  json::value result = co_await request(std::move(method), std::move(params));
  const json::object* obj = result.if_object();
  const json::value* cancelled = obj != nullptr ? obj->if_contains("cancelled") : nullptr;
  if (cancelled == nullptr || !cancelled->is_bool()) {
    throw ProtocolError("session/cancel result has no boolean cancelled: " + excerpt(json::serialize(result)));
  }
  co_return cancelled->get_bool();
}

namespace {

protocol::DecisionResult parse_decision_result(const json::value& result, std::string_view method) {
  const json::object* obj = result.if_object();
  const json::value* accepted = obj != nullptr ? obj->if_contains("accepted") : nullptr;
  if (accepted == nullptr || !accepted->is_bool()) {
    throw ProtocolError(std::string(method) + " result has no boolean accepted: " + excerpt(json::serialize(result)));
  }
  return protocol::DecisionResult{.accepted = accepted->get_bool()};
}

}  // namespace

asio::awaitable<protocol::DecisionResult> Client::session_approve(std::string session_id, std::string approval_id,
                                                                 protocol::ApprovalOutcome outcome,
                                                                 std::optional<std::string> message) {
  if (outcome == protocol::ApprovalOutcome::cancelled) {
    // Only the daemon settles an approval as cancelled (the turn's cancel).
    throw std::invalid_argument("session/approve: outcome cancelled is the daemon's, not a client's");
  }
  const protocol::ApproveParams approve{.session_id = std::move(session_id),
                                        .approval_id = std::move(approval_id),
                                        .outcome = outcome,
                                        .message = std::move(message)};
  std::string method(approve_method);
  json::value result = co_await request(std::move(method), json::value_from(approve));
  co_return parse_decision_result(result, approve_method);
}

asio::awaitable<protocol::DecisionResult> Client::session_answer(std::string session_id, std::string question_id,
                                                                std::vector<protocol::Answer> answers) {
  const protocol::AnswerParams answer{
      .session_id = std::move(session_id), .question_id = std::move(question_id), .answers = std::move(answers)};
  std::string method(answer_method);
  json::value result = co_await request(std::move(method), json::value_from(answer));
  co_return parse_decision_result(result, answer_method);
}

asio::awaitable<void> Client::shutdown() {
  std::string method(shutdown_method);
  json::value params;  // shutdown takes no params
  co_await request(std::move(method), std::move(params));
}

asio::awaitable<protocol::ToolsListResult> Client::tools_list() {
  std::string method(tools_list_method);
  json::value params = json::object{};
  json::value result = co_await request(std::move(method), std::move(params));
  protocol::ToolsListResult tools = parse_tools_list_result(result);
  co_return tools;
}

asio::awaitable<SessionList> Client::session_list(SessionListOptions options) {
  json::object params;
  if (options.limit) params["limit"] = *options.limit;
  if (options.cursor) params["cursor"] = std::move(*options.cursor);
  json::value params_value = std::move(params);
  std::string method(list_method);
  json::value result = co_await request(std::move(method), std::move(params_value));
  SessionList list = parse_session_list_result(result);
  co_return list;
}

asio::awaitable<SessionEvents> Client::session_events(std::string session_id, std::int64_t after_seq,
                                                      std::int64_t limit) {
  json::object params{{"sessionId", std::move(session_id)}, {"afterSeq", after_seq}};
  if (limit > 0) params["limit"] = limit;
  json::value params_value = std::move(params);
  std::string method(events_method);
  json::value result = co_await request(std::move(method), std::move(params_value));
  SessionEvents page = parse_session_events_result(result);
  co_return page;
}

asio::awaitable<SessionSubscription> Client::session_subscribe(std::string session_id,
                                                               std::optional<std::int64_t> after_seq,
                                                               NotificationHandler on_event) {
  SessionSubscription out;
  // Registered first: the replayed events precede the response.
  if (on_event) out.events = subscribe(session_id, only_events_of(session_id, std::move(on_event)));
  json::object params{{"sessionId", session_id}};
  if (after_seq) params["afterSeq"] = *after_seq;
  json::value params_value = std::move(params);
  std::string method(subscribe_method);
  json::value result = co_await request(std::move(method), std::move(params_value));  // throws: out.events resets
  out.last_seq = int_field(result_object(result, "session/subscribe"), "lastSeq", "session/subscribe result",
                           result);
  co_return out;
}

asio::awaitable<bool> Client::session_unsubscribe(std::string session_id) {
  json::value params = json::object{{"sessionId", std::move(session_id)}};
  std::string method(unsubscribe_method);
  json::value result = co_await request(std::move(method), std::move(params));
  const bool unsubscribed =
      bool_field(result_object(result, "session/unsubscribe"), "unsubscribed", "session/unsubscribe result", result);
  co_return unsubscribed;
}

Subscription Client::subscribe(std::string session_id, NotificationHandler handler) {
  const std::uint64_t id = core_->next_subscription_id();
  asio::dispatch(core_->executor(), [core = core_, id, session = std::move(session_id),
                                     handler = std::move(handler)]() mutable {
    core->add_subscription(id, std::move(session), std::move(handler));
  });
  return Subscription(core_, id);
}

asio::awaitable<void> Client::close() { co_await core_->close(); }

bool Client::closed() const { return core_->closed(); }

ClientStats Client::stats() const { return core_->stats(); }

const asio::any_io_executor& Client::executor() const { return core_->executor(); }

const json::object* event_of(const Notification& notification) {
  if (notification.method != "session.event") return nullptr;
  const json::value* event = notification.params.if_contains("event");
  return event != nullptr ? event->if_object() : nullptr;
}

namespace {

/// `event` read as T when its type is T's; the protocol's reader throws on
/// a malformed one, which a client reports as the daemon's fault.
template <class T>
std::optional<T> typed_event(const json::object& event) {
  const json::value* type = event.if_contains("type");
  if (type == nullptr || !type->is_string() || type->get_string() != T::type) return std::nullopt;
  const json::value* data = event.if_contains("data");
  if (data == nullptr) throw ProtocolError(std::string(T::type) + " event has no data");
  try {
    return json::value_to<T>(*data);
  } catch (const std::exception& e) {
    throw ProtocolError(std::string(T::type) + " event is malformed (" + e.what() +
                        "): " + excerpt(json::serialize(*data)));
  }
}

template <class T>
std::optional<T> typed_event(const Notification& notification) {
  const json::object* event = event_of(notification);
  return event != nullptr ? typed_event<T>(*event) : std::nullopt;
}

}  // namespace

std::optional<protocol::ApprovalRequested> as_approval_requested(const json::object& event) {
  return typed_event<protocol::ApprovalRequested>(event);
}
std::optional<protocol::ApprovalResolved> as_approval_resolved(const json::object& event) {
  return typed_event<protocol::ApprovalResolved>(event);
}
std::optional<protocol::QuestionRequested> as_question_requested(const json::object& event) {
  return typed_event<protocol::QuestionRequested>(event);
}
std::optional<protocol::QuestionResolved> as_question_resolved(const json::object& event) {
  return typed_event<protocol::QuestionResolved>(event);
}
std::optional<protocol::ApprovalRequested> as_approval_requested(const Notification& notification) {
  return typed_event<protocol::ApprovalRequested>(notification);
}
std::optional<protocol::ApprovalResolved> as_approval_resolved(const Notification& notification) {
  return typed_event<protocol::ApprovalResolved>(notification);
}
std::optional<protocol::QuestionRequested> as_question_requested(const Notification& notification) {
  return typed_event<protocol::QuestionRequested>(notification);
}
std::optional<protocol::QuestionResolved> as_question_resolved(const Notification& notification) {
  return typed_event<protocol::QuestionResolved>(notification);
}

}  // namespace harnessd::client
