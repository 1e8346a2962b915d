// session/approve and session/answer for a turn that runs on another node
// of a shared store: this node checks the session's log for the pending
// decision, then the store carries the request to the node holding the
// session's lease, which hands it to the waiting turn.
#pragma once

#include "harness/event_sink.hpp"
#include "harnessd/protocol/messages.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>

namespace harnessd::harness {
class SessionRegistry;
}

namespace harnessd::server {

/// `reply.session_id` is the store's id; `envelope` wraps the session's
/// events for this node's subscribers (the log is caught up first). True
/// when the log shows the decision pending and a live node running the
/// session was sent it. Throws rpc::RpcError (-32602) for a reply too large
/// to forward.
boost::asio::awaitable<bool> forward_decision(harness::SessionRegistry& sessions, protocol::ApproveParams reply,
                                              harness::EventSink::Envelope envelope);
boost::asio::awaitable<bool> forward_decision(harness::SessionRegistry& sessions, protocol::AnswerParams reply,
                                              harness::EventSink::Envelope envelope);

/// On the node running the turn (any thread): hands a forwarded decision to
/// the session's wait; a stale or malformed one is dropped with a log line.
void apply_forwarded_decision(harness::SessionRegistry& sessions, const std::string& message);

}  // namespace harnessd::server
