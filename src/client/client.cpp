// The client's connection state: a pending-request table keyed by the ids we
// generate, one reader coroutine that classifies every incoming frame and one
// writer coroutine that batches outgoing requests. All of it is confined to
// the client's executor.
#include "harnessd/client/client.hpp"

#include "harnessd/protocol/notifications.hpp"
#include "harnessd/rpc/codec.hpp"
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

using protocol::Method;

/// A method's name as a request carries it. GCC 12: names and frames are
/// built in named locals (this returns one), never as temporaries inside a
/// co_await expression.
std::string method_name(Method method) { return std::string(protocol::name_of(method)); }

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

/// session.event notifications of exactly `session_id`: what a
/// session/subscribe subscription delivers.
NotificationHandler only_events_of(std::string session_id, NotificationHandler handler) {
  return [session_id = std::move(session_id), handler = std::move(handler)](const Notification& n) {
    if (n.method != protocol::session_event_method) return;
    const json::string* sid = string_field(n.params, "sessionId");
    if (sid == nullptr || *sid != session_id) return;
    handler(n);
  };
}

}  // namespace

namespace detail {

void throw_malformed_result(std::string_view method, const std::exception& problem, const json::value& result) {
  throw ProtocolError(std::string(method) + " result is malformed (" + problem.what() +
                      "): " + excerpt(json::serialize(result)));
}

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
  /// Executor-confined: runs `handler` (posted) once the connection ends.
  void on_close(std::function<void()> handler) {
    if (closed_) {
      asio::post(executor_, std::move(handler));
      return;
    }
    close_handlers_.push_back(std::move(handler));
  }
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
    // Posted, so a handler never runs inside the reader or close().
    for (auto& handler : std::exchange(close_handlers_, {})) asio::post(executor_, std::move(handler));
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [id, p] : pending) {
      p->failure = std::make_exception_ptr(TransportClosed(close_reason_));
      p->done = true;
      p->wakeup->notify();
    }
  }

  void on_frame(std::string_view frame, std::uint64_t index) {
    rpc::Decoded decoded = rpc::decode_frame(frame);
    if (auto* note = std::get_if<rpc::Notification>(&decoded)) {
      on_notification(*note, frame, index);
    } else if (auto* response = std::get_if<rpc::Response>(&decoded)) {
      if (const std::shared_ptr<Pending> pending = take_pending(response->id, frame)) {
        pending->response.result = std::move(response->result);
        settle(*pending, frame, index);
      }
    } else if (auto* error = std::get_if<rpc::ErrorResponse>(&decoded)) {
      if (const std::shared_ptr<Pending> pending = take_pending(error->id, frame)) {
        pending->response.error =
            Response::Error{static_cast<int>(error->code), std::move(error->message), std::move(error->data)};
        settle(*pending, frame, index);
      }
    } else if (std::holds_alternative<rpc::Request>(decoded)) {
      // Directional protocol: a server request is never answered and never
      // resolves one of our waiters, even if its id matches.
      ++stats_.server_requests;
      spdlog::debug("{}: ignored a request frame from the server: {}", describe_, excerpt(frame));
    } else {
      const rpc::Invalid& invalid = std::get<rpc::Invalid>(decoded);
      // A malformed answer to one of our requests fails that request: the
      // client never guesses what such an answer meant.
      if (invalid.response) {
        if (const std::shared_ptr<Pending> pending = take_pending(invalid.error.id, frame)) {
          pending->failure = std::make_exception_ptr(ProtocolError(invalid.error.message + ": " + excerpt(frame)));
          settle(*pending, frame, index);
          return;
        }
      }
      ++stats_.malformed;
      spdlog::debug("{}: ignored a malformed frame ({}): {}", describe_, invalid.error.message, excerpt(frame));
    }
  }

  /// The request `id` answers, removed from the table; nullptr (counted)
  /// when nobody waits for it.
  std::shared_ptr<Pending> take_pending(const json::value& id, std::string_view frame) {
    const std::optional<std::int64_t> ours = our_id(id);
    auto it = ours ? pending_.find(*ours) : pending_.end();
    if (it == pending_.end()) {
      ++stats_.unknown_ids;
      spdlog::debug("{}: ignored a response nobody waits for: {}", describe_, excerpt(frame));
      return nullptr;
    }
    std::shared_ptr<Pending> pending = std::move(it->second);
    pending_.erase(it);
    ++stats_.responses;
    return pending;
  }

  static void settle(Pending& pending, std::string_view frame, std::uint64_t index) {
    pending.response.raw = std::string(frame);
    pending.response.frame_index = index;
    pending.done = true;
    pending.wakeup->notify();
  }

  void on_notification(rpc::Notification& note_frame, std::string_view frame, std::uint64_t index) {
    if (!note_frame.params.is_object()) {
      ++stats_.malformed;
      spdlog::debug("{}: ignored a notification without params object: {}", describe_, excerpt(frame));
      return;
    }
    const std::string& method = note_frame.method;
    ++stats_.notifications;
    if (subs_.empty()) return;
    const json::object& p = note_frame.params.get_object();
    const json::string* session = string_field(p, "sessionId");
    const json::string* parent = string_field(p, "parentSessionId");
    const json::string* child = string_field(p, "childSessionId");
    const bool started = method == protocol::subagent_started_method;

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
      if (!note) note = Notification{method, p, std::string(frame), index};
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
  std::vector<std::function<void()>> close_handlers_;
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

asio::awaitable<protocol::InitializeResult> Client::initialize(protocol::InitializeParams params) {
  if (!params.client_info) params.client_info = json::object{{"name", "harnessd-cpp-client"}};
  if (!params.protocol_version) params.protocol_version = 1;
  std::string method = method_name(Method::initialize);
  json::value body = json::value_from(params);
  json::value result = co_await request(std::move(method), std::move(body));
  co_return read_result<protocol::InitializeResult>(result, protocol::name_of(Method::initialize));
}

asio::awaitable<protocol::PromptResult> Client::session_prompt(std::string session_id, std::string text) {
  protocol::PromptParams params{.session_id = std::move(session_id)};
  params.content_blocks.emplace_back(json::object{{"type", "text"}, {"text", std::move(text)}});
  std::string method = method_name(Method::session_prompt);
  json::value body = json::value_from(params);
  json::value result = co_await request(std::move(method), std::move(body));
  co_return read_result<protocol::PromptResult>(result, protocol::name_of(Method::session_prompt));
}

asio::awaitable<bool> Client::session_cancel(std::string session_id) {
  const protocol::CancelParams params{std::move(session_id)};
  std::string method = method_name(Method::session_cancel);
  json::value body = json::value_from(params);
  json::value result = co_await request(std::move(method), std::move(body));
  co_return read_result<protocol::CancelResult>(result, protocol::name_of(Method::session_cancel)).cancelled;
}

asio::awaitable<protocol::DecisionResult> Client::session_approve(std::string session_id, std::string approval_id,
                                                                 protocol::ApprovalOutcome outcome,
                                                                 std::optional<std::string> message) {
  if (outcome == protocol::ApprovalOutcome::cancelled) {
    // Only the daemon settles an approval as cancelled (the turn's cancel).
    throw std::invalid_argument("session/approve: outcome cancelled is the daemon's, not a client's");
  }
  const protocol::ApproveParams params{.session_id = std::move(session_id),
                                       .approval_id = std::move(approval_id),
                                       .outcome = outcome,
                                       .message = std::move(message)};
  std::string method = method_name(Method::session_approve);
  json::value body = json::value_from(params);
  json::value result = co_await request(std::move(method), std::move(body));
  co_return read_result<protocol::DecisionResult>(result, protocol::name_of(Method::session_approve));
}

asio::awaitable<protocol::DecisionResult> Client::session_answer(std::string session_id, std::string question_id,
                                                                std::vector<protocol::Answer> answers) {
  const protocol::AnswerParams params{
      .session_id = std::move(session_id), .question_id = std::move(question_id), .answers = std::move(answers)};
  std::string method = method_name(Method::session_answer);
  json::value body = json::value_from(params);
  json::value result = co_await request(std::move(method), std::move(body));
  co_return read_result<protocol::DecisionResult>(result, protocol::name_of(Method::session_answer));
}

asio::awaitable<void> Client::shutdown() {
  std::string method = method_name(Method::shutdown);
  json::value params;  // shutdown takes no params
  co_await request(std::move(method), std::move(params));
}

asio::awaitable<protocol::ToolsListResult> Client::tools_list() {
  std::string method = method_name(Method::tools_list);
  json::value body = json::value_from(protocol::ToolsListParams{});
  json::value result = co_await request(std::move(method), std::move(body));
  co_return read_result<protocol::ToolsListResult>(result, protocol::name_of(Method::tools_list));
}

asio::awaitable<protocol::ListResult> Client::session_list(protocol::ListParams params) {
  std::string method = method_name(Method::session_list);
  json::value body = json::value_from(params);
  json::value result = co_await request(std::move(method), std::move(body));
  co_return read_result<protocol::ListResult>(result, protocol::name_of(Method::session_list));
}

asio::awaitable<protocol::EventsResult> Client::session_events(std::string session_id, std::int64_t after_seq,
                                                               std::int64_t limit) {
  protocol::EventsParams params{.session_id = std::move(session_id), .after_seq = after_seq};
  if (limit > 0) params.limit = limit;
  std::string method = method_name(Method::session_events);
  json::value body = json::value_from(params);
  json::value result = co_await request(std::move(method), std::move(body));
  co_return read_result<protocol::EventsResult>(result, protocol::name_of(Method::session_events));
}

asio::awaitable<protocol::DeleteResult> Client::session_delete(std::string session_id) {
  const protocol::DeleteParams params{std::move(session_id)};
  std::string method = method_name(Method::session_delete);
  json::value body = json::value_from(params);
  json::value result = co_await request(std::move(method), std::move(body));
  co_return read_result<protocol::DeleteResult>(result, protocol::name_of(Method::session_delete));
}

asio::awaitable<SessionSubscription> Client::session_subscribe(std::string session_id,
                                                               std::optional<std::int64_t> after_seq,
                                                               NotificationHandler on_event) {
  SessionSubscription out;
  // Registered first: the replayed events precede the response.
  if (on_event) out.events = subscribe(session_id, only_events_of(session_id, std::move(on_event)));
  const protocol::SubscribeParams params{.session_id = std::move(session_id), .after_seq = after_seq};
  std::string method = method_name(Method::session_subscribe);
  json::value body = json::value_from(params);
  json::value result = co_await request(std::move(method), std::move(body));  // throws: out.events resets
  out.last_seq = read_result<protocol::SubscribeResult>(result, protocol::name_of(Method::session_subscribe)).last_seq;
  co_return out;
}

asio::awaitable<bool> Client::session_unsubscribe(std::string session_id) {
  const protocol::UnsubscribeParams params{std::move(session_id)};
  std::string method = method_name(Method::session_unsubscribe);
  json::value body = json::value_from(params);
  json::value result = co_await request(std::move(method), std::move(body));
  co_return read_result<protocol::UnsubscribeResult>(result, protocol::name_of(Method::session_unsubscribe))
      .unsubscribed;
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
void Client::on_close(std::function<void()> handler) { core_->on_close(std::move(handler)); }

ClientStats Client::stats() const { return core_->stats(); }

const asio::any_io_executor& Client::executor() const { return core_->executor(); }

const json::object* event_of(const Notification& notification) {
  if (notification.method != protocol::session_event_method) return nullptr;
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
