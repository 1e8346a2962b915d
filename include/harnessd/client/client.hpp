// The C++ client of the directional protocol (docs/protocol.md): it only
// sends requests, matches responses by the ids it generated and hands
// notifications to per-session subscribers. It cannot send a notification or
// answer a request. Params and results are the protocol's own types
// (harnessd/protocol), read and written with their JSON conversions.
#pragma once

#include "harnessd/client/client_transport.hpp"
#include "harnessd/client/errors.hpp"
#include "harnessd/protocol/events.hpp"
#include "harnessd/protocol/messages.hpp"
#include "harnessd/protocol/methods.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::client {

namespace detail {
class ClientCore;
}

/// One notification from the daemon, as received.
struct Notification {
  std::string method;          ///< "session.event", "subagent.started", ...
  boost::json::object params;  ///< always an object (other frames are dropped)
  std::string raw;             ///< the frame exactly as it arrived
  std::uint64_t frame_index = 0;  ///< position among all frames this client received
};

/// A response to one of our requests: `error` is set, or `result` is.
struct Response {
  boost::json::value result;
  struct Error {
    int code = 0;
    std::string message;
    boost::json::value data;
  };
  std::optional<Error> error;
  std::string raw;
  std::uint64_t frame_index = 0;
};

/// `result` read as T, a result type of harnessd/protocol (value_to);
/// ProtocolError naming `method` when it has another shape.
template <class T>
T read_result(const boost::json::value& result, std::string_view method);

/// The `event` ({type, seq, time, data}) of a session.event notification;
/// nullptr for other notifications.
const boost::json::object* event_of(const Notification& notification);

// The decision events (docs/protocol.md §4.11-§4.12), typed. Each takes an event
// as session/events and session.event carry it ({type, seq, time, data}):
// nullopt when the event is of another type; ProtocolError when it is of
// this type but malformed.
std::optional<protocol::ApprovalRequested> as_approval_requested(const boost::json::object& event);
std::optional<protocol::ApprovalResolved> as_approval_resolved(const boost::json::object& event);
std::optional<protocol::QuestionRequested> as_question_requested(const boost::json::object& event);
std::optional<protocol::QuestionResolved> as_question_resolved(const boost::json::object& event);
/// The same for a notification: nullopt unless it is a session.event of that type.
std::optional<protocol::ApprovalRequested> as_approval_requested(const Notification& notification);
std::optional<protocol::ApprovalResolved> as_approval_resolved(const Notification& notification);
std::optional<protocol::QuestionRequested> as_question_requested(const Notification& notification);
std::optional<protocol::QuestionResolved> as_question_resolved(const Notification& notification);

/// Frame counters, for diagnostics and tests.
struct ClientStats {
  std::uint64_t frames = 0;            ///< every frame read
  std::uint64_t notifications = 0;
  std::uint64_t responses = 0;         ///< matched to a pending request
  std::uint64_t server_requests = 0;   ///< frames with id and method: ignored
  std::uint64_t unknown_ids = 0;       ///< responses nobody waits for: ignored
  std::uint64_t malformed = 0;         ///< not JSON, not an object, oversized...: ignored
};

using NotificationHandler = std::function<void(const Notification&)>;

/// Removes its subscription when destroyed or reset(). Move-only.
class Subscription {
 public:
  Subscription() = default;
  Subscription(Subscription&& other) noexcept;
  Subscription& operator=(Subscription&& other) noexcept;
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription();

  void reset();
  explicit operator bool() const noexcept { return id_ != 0; }

 private:
  friend class Client;
  Subscription(std::weak_ptr<detail::ClientCore> core, std::uint64_t id) : core_(std::move(core)), id_(id) {}
  std::weak_ptr<detail::ClientCore> core_;
  std::uint64_t id_ = 0;
};

/// The answer to session/subscribe, with the local handler that receives the
/// subscription's events.
struct SessionSubscription {
  /// The daemon's `lastSeq`: every event up to it was replayed before the
  /// response (so the handler has seen those already); later ones are live.
  std::int64_t last_seq = -1;
  /// Delivers the session's session.event notifications to the handler
  /// given to session_subscribe(). Resetting it only stops the local
  /// delivery; session_unsubscribe() ends the daemon's subscription.
  Subscription events;
};

/// A connection to one daemon.
///
/// Threading: the client lives on the executor it was created with, which
/// must not run handlers concurrently (a single-threaded io_context or a
/// strand). Await its coroutines from that executor; subscribers are called
/// there too, in frame order, from the reader (keep them short). subscribe()
/// and Subscription::reset() may be called from any thread.
///
/// Lifetime: destroying the Client closes the connection at once (pending
/// requests fail with TransportClosed); close() does it gracefully. The
/// executor's context must outlive the Client.
class Client {
 public:
  Client(boost::asio::any_io_executor executor, std::unique_ptr<ClientTransport> transport);
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  /// `initialize`; throws RpcError (e.g. unknown provider) or ProtocolError.
  /// Unset clientInfo and protocolVersion are sent as this client's
  /// ({"name":"harnessd-cpp-client"}, 1); other unset fields are not sent,
  /// so the daemon's defaults apply.
  boost::asio::awaitable<protocol::InitializeResult> initialize(protocol::InitializeParams params = {});

  /// Sends a request and returns its result; throws RpcError for an error
  /// response, TransportClosed when the connection ends first.
  boost::asio::awaitable<boost::json::value> request(std::string method, boost::json::value params);

  /// Like request() but returns error responses as values, with the raw frame.
  boost::asio::awaitable<Response> call(std::string method, boost::json::value params);

  /// `session/prompt` with one text block. Resolves after the turn settled
  /// (every notification of the turn has been delivered by then).
  boost::asio::awaitable<protocol::PromptResult> session_prompt(std::string session_id, std::string text);

  /// `session/cancel`; true when a running turn was cancelled.
  boost::asio::awaitable<bool> session_cancel(std::string session_id);

  /// `session/approve`: settles the approval `approval_id` of a waiting
  /// turn (an approval/requested event) with `outcome` (allowed_once,
  /// allowed_for_session or rejected; `message` is told to the model with a
  /// rejection). Any connection that may see the session may answer. One
  /// that is no longer pending is RpcError -32602 with data.reason
  /// "not-pending".
  boost::asio::awaitable<protocol::DecisionResult> session_approve(std::string session_id, std::string approval_id,
                                                                  protocol::ApprovalOutcome outcome,
                                                                  std::optional<std::string> message = std::nullopt);

  /// `session/answer`: answers the question/requested `question_id`; one
  /// Answer per question ({id, selected labels, custom text}); no answers
  /// declines. Answers that do not fit the questions are RpcError -32602.
  boost::asio::awaitable<protocol::DecisionResult> session_answer(std::string session_id, std::string question_id,
                                                                 std::vector<protocol::Answer> answers);

  /// `shutdown`: the daemon lets this connection's turns settle, then answers.
  boost::asio::awaitable<void> shutdown();

  /// `tools/list` (after initialize): the tools the model of this
  /// connection's sessions is offered.
  boost::asio::awaitable<protocol::ToolsListResult> tools_list();

  /// `session/list`: one page of the daemon's sessions, most recently updated
  /// first. Page on with the result's next_cursor until it is absent.
  boost::asio::awaitable<protocol::ListResult> session_list(protocol::ListParams params = {});

  /// `session/events`: logged events of a session with seq > after_seq
  /// (-1: from the start), at most `limit` (1..1000; 0: the daemon's default
  /// of 200). An unknown session is RpcError -32602 "unknown session: ID".
  /// Each event is JSON text, the log's line as the daemon sent it.
  boost::asio::awaitable<protocol::EventsResult> session_events(std::string session_id, std::int64_t after_seq = -1,
                                                                std::int64_t limit = 0);

  /// `session/delete`: removes an idle session and its log. A session whose
  /// turn runs is RpcError -32001; an unknown one RpcError -32602
  /// "unknown session: ID".
  boost::asio::awaitable<protocol::DeleteResult> session_delete(std::string session_id);

  /// `session/subscribe`: follow a session that any connection runs. `on_event`
  /// (may be empty) is registered before the request goes out and then sees,
  /// in seq order, every session.event of exactly this session: first the
  /// logged events with seq > after_seq (replayed before the response; absent
  /// after_seq replays nothing), then live ones, until the returned
  /// SessionSubscription::events is reset or the connection ends. It runs on
  /// the client's executor like subscribe()'s handlers. Errors: RpcError
  /// -32602 (unknown session, already subscribed, too many subscriptions);
  /// the local handler is removed then.
  boost::asio::awaitable<SessionSubscription> session_subscribe(std::string session_id,
                                                                std::optional<std::int64_t> after_seq,
                                                                NotificationHandler on_event);

  /// `session/unsubscribe`: true when this connection was subscribed. No event
  /// of the session arrives through the subscription after it returns (events
  /// of this connection's own prompts still do).
  boost::asio::awaitable<bool> session_unsubscribe(std::string session_id);

  /// Calls `handler` for every notification whose params.sessionId,
  /// params.parentSessionId or params.childSessionId is `session_id`, and
  /// for those of child sessions announced by subagent.started while the
  /// subscription lives (so a turn's subagents are seen too).
  Subscription subscribe(std::string session_id, NotificationHandler handler);

  /// Fails every pending request with TransportClosed, then closes the
  /// transport gracefully. Idempotent.
  boost::asio::awaitable<void> close();

  /// True once the connection ended or close() began.
  bool closed() const;
  /// Calls `handler` once, posted to the client's executor, when the
  /// connection ends or close() begins (at once if that has happened), so a
  /// waiter needs no polling. Call it on the client's executor.
  void on_close(std::function<void()> handler);
  ClientStats stats() const;
  const boost::asio::any_io_executor& executor() const;

 private:
  std::shared_ptr<detail::ClientCore> core_;
};

namespace detail {
[[noreturn]] void throw_malformed_result(std::string_view method, const std::exception& problem,
                                         const boost::json::value& result);
}  // namespace detail

template <class T>
T read_result(const boost::json::value& result, std::string_view method) {
  try {
    return boost::json::value_to<T>(result);
  } catch (const std::exception& e) {
    detail::throw_malformed_result(method, e, result);
  }
}

}  // namespace harnessd::client
