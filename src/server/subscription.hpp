// One connection's subscription to one session (session/subscribe). The
// session hands it every block of events it logs, on the session's strand;
// it queues them in the connection's outbox without ever waiting, so a slow
// subscriber cannot slow the turn: past its bound the connection is cut.
// While the history before the subscription is still being replayed, live
// blocks wait here, so the connection sees every event once, in seq order.
#pragma once

#include "harness/event_subscriber.hpp"
#include "server/outbox.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace harnessd::server {

class Metrics;

class Subscription final : public harness::EventSubscriber {
 public:
  Subscription(const harness::TurnOwner* owner, std::shared_ptr<Outbox> outbox, std::size_t max_bytes,
               Metrics& metrics);

  /// Any thread (the session's strand). Never waits.
  void on_logged(const Block& block, std::size_t count) override;

  /// Connection strand, once the replay is queued: queues the blocks that
  /// arrived meanwhile, then lets later ones go straight to the outbox.
  boost::asio::awaitable<void> go_live();

 private:
  const std::shared_ptr<Outbox> outbox_;
  const std::size_t max_bytes_;
  Metrics& metrics_;
  std::mutex mutex_;
  bool live_ = false;
  std::vector<std::pair<Block, std::size_t>> pending_;  ///< while replaying
  std::size_t pending_bytes_ = 0;
};

}  // namespace harnessd::server
