// What one client connection has told the daemon and what it runs: its
// initialize choices, the sessions it is prompting and those it subscribes
// to. The method handlers read and change it; everything here is used from
// the connection's strand.
#pragma once

#include "harness/session.hpp"
#include "harnessd/protocol/messages.hpp"
#include "server/outbox.hpp"
#include "server/server_context.hpp"
#include "server/subscription.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace harnessd::llm {
class Provider;
}

namespace harnessd::server {

struct ClientState final : harness::TurnOwner {
  ClientState(ServerContext& context, std::shared_ptr<Outbox> outbox)
      : context(context), outbox(std::move(outbox)) {}

  /// Cancels every turn this client started that still runs.
  void cancel_turns(const std::string& why) {
    for (const auto& [session, count] : prompting) session->cancel(why, this);
  }

  /// Ends every subscription (the connection is ending).
  void end_subscriptions();

  /// Whether `subscription` is this client's current one to `session_id`.
  bool subscribed(std::string_view session_id, const Subscription& subscription) const {
    const auto it = subscriptions.find(session_id);
    return it != subscriptions.end() && it->second.subscription.get() == &subscription;
  }

  ServerContext& context;
  const std::shared_ptr<Outbox> outbox;  ///< where this client's frames go
  bool initialized = false;
  /// Who the client proved to be; nullptr until it authenticated.
  const auth::Principal* principal = nullptr;
  bool stopping = false;  ///< the daemon is stopping this connection: no new prompts
  llm::Provider* provider = nullptr;
  std::string model;
  std::optional<std::int64_t> max_tokens;
  std::optional<std::string> cwd;  ///< the workspace of sessions this client creates; unset: one per session
  /// A network client (not stdio): its workspaces are confined to the
  /// workspace root.
  bool network = false;
  tools::SandboxMode sandbox = tools::SandboxMode::workspace_write;
  protocol::OnDisconnect on_disconnect = protocol::OnDisconnect::cancel;
  protocol::ApprovalPolicy approval_policy = protocol::ApprovalPolicy::never;
  std::int64_t context_window = 128'000;
  llm::ModelSettings settings;
  int max_steps = 0;
  /// Sessions with a prompt of this client in flight, and how many.
  std::map<std::shared_ptr<harness::Session>, int> prompting;

  struct Subscribed {
    std::shared_ptr<harness::Session> session;  ///< keeps it loaded
    std::shared_ptr<Subscription> subscription;
  };
  std::map<std::string, Subscribed, std::less<>> subscriptions;
};

}  // namespace harnessd::server
