// What one client connection has told the daemon and what it runs: its
// initialize choices and the sessions it is prompting. The method handlers
// read and change it; everything here is used from the connection's strand.
#pragma once

#include "harness/session.hpp"
#include "server/outbox.hpp"
#include "server/server_context.hpp"

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

  ServerContext& context;
  const std::shared_ptr<Outbox> outbox;  ///< where this client's frames go
  bool initialized = false;
  bool stopping = false;  ///< the daemon is stopping this connection: no new prompts
  llm::Provider* provider = nullptr;
  std::string model;
  std::optional<std::int64_t> max_tokens;
  std::optional<std::string> cwd;
  /// Sessions with a prompt of this client in flight, and how many.
  std::map<std::shared_ptr<harness::Session>, int> prompting;
};

}  // namespace harnessd::server
