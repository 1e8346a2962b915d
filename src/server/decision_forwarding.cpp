#include "server/decision_forwarding.hpp"

#include "harness/session_registry.hpp"
#include "harnessd/rpc/error_code.hpp"
#include "store/event_store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

namespace harnessd::server {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

const std::string& decision_id(const protocol::ApproveParams& reply) { return reply.approval_id; }
const std::string& decision_id(const protocol::AnswerParams& reply) { return reply.question_id; }
std::string_view method_of(const protocol::ApproveParams&) { return "session/approve"; }
std::string_view method_of(const protocol::AnswerParams&) { return "session/answer"; }

/// On the session's strand: whether its log (caught up with the store)
/// shows `id` requested and not yet resolved.
asio::awaitable<bool> logged_pending(std::shared_ptr<harness::Session> session, std::string id,
                                     harness::EventSink::Envelope envelope) {
  std::optional<std::string> no_cwd;
  if (!co_await session->ensure_loaded(std::move(no_cwd), store::OpenMode::existing)) co_return false;
  co_await session->catch_up(std::move(envelope));
  co_return session->logged_pending(id);
}

template <class Reply>
asio::awaitable<bool> forward(harness::SessionRegistry& sessions, Reply reply, harness::EventSink::Envelope envelope) {
  std::shared_ptr<harness::Session> session = sessions.get_or_create(reply.session_id);
  const bool pending = co_await asio::co_spawn(
      session->strand(), logged_pending(session, decision_id(reply), std::move(envelope)), asio::use_awaitable);
  if (!pending) co_return false;
  // The store's id travels beside the params: it may be longer than a
  // client's session id may be.
  json::value params = json::value_from(reply);
  params.as_object()["sessionId"] = "-";
  std::string message = json::serialize(
      json::object{{"method", method_of(reply)}, {"sessionId", reply.session_id}, {"params", std::move(params)}});
  if (message.size() > store::Coordination::max_forwarded_bytes) {
    throw rpc::RpcError(rpc::ErrorCode::invalid_params,
                        "this decision is too large to reach the node running the session (at most " +
                            std::to_string(store::Coordination::max_forwarded_bytes) + " bytes)");
  }
  std::string id = reply.session_id;
  const bool forwarded = co_await sessions.store().coordination()->forward_decision(std::move(id), std::move(message));
  co_return forwarded;
}

template <class Reply>
asio::awaitable<void> resolve_on_strand(std::shared_ptr<harness::Session> session, Reply reply) {
  const auto resolution = session->decisions().resolve(std::move(reply));
  if (resolution.status != harness::PendingDecisions::Resolution::Status::accepted) {
    spdlog::info("a forwarded decision for session {} found nothing waiting for it", session->id());
  }
  co_return;
}

}  // namespace

asio::awaitable<bool> forward_decision(harness::SessionRegistry& sessions, protocol::ApproveParams reply,
                                       harness::EventSink::Envelope envelope) {
  const bool forwarded = co_await forward(sessions, std::move(reply), std::move(envelope));
  co_return forwarded;
}

asio::awaitable<bool> forward_decision(harness::SessionRegistry& sessions, protocol::AnswerParams reply,
                                       harness::EventSink::Envelope envelope) {
  const bool forwarded = co_await forward(sessions, std::move(reply), std::move(envelope));
  co_return forwarded;
}

void apply_forwarded_decision(harness::SessionRegistry& sessions, const std::string& message) {
  try {
    const json::value parsed = json::parse(message);
    const json::object& obj = parsed.as_object();
    const json::value& params = obj.at("params");
    const std::string_view method = obj.at("method").as_string();
    const std::string session_id(obj.at("sessionId").as_string());
    std::shared_ptr<harness::Session> session = sessions.find(session_id);
    if (session == nullptr) return;  // no longer running here
    if (method == "session/approve") {
      asio::co_spawn(session->strand(), resolve_on_strand(session, json::value_to<protocol::ApproveParams>(params)),
                     asio::detached);
    } else if (method == "session/answer") {
      asio::co_spawn(session->strand(), resolve_on_strand(session, json::value_to<protocol::AnswerParams>(params)),
                     asio::detached);
    }
  } catch (const std::exception& e) {
    spdlog::warn("dropped a forwarded decision: {}", e.what());
  }
}

}  // namespace harnessd::server
