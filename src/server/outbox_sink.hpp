// The EventSink of one prompt: its notifications go to the prompting
// connection's Outbox, in order, behind the events' log writes.
#pragma once

#include "harness/event_sink.hpp"
#include "server/outbox.hpp"

#include <memory>

namespace harnessd::server {

class Metrics;

class OutboxSink final : public harness::EventSink {
 public:
  /// `namespaced`: sessions live in per-principal namespaces, and
  /// notifications name them as their owner does (auth::owner_view).
  OutboxSink(std::shared_ptr<Outbox> outbox, Metrics& metrics, bool namespaced);

  Envelope envelope(std::string_view session_id) override;
  boost::asio::awaitable<bool> on_events(std::shared_ptr<const std::string> block, std::size_t count) override;
  boost::asio::awaitable<void> on_subagent_started(protocol::SubagentStarted note) override;
  boost::asio::awaitable<void> on_subagent_finished(protocol::SubagentFinished note) override;

 private:
  boost::asio::awaitable<void> push(std::string frame);

  std::string shown(std::string_view session_id) const;

  std::shared_ptr<Outbox> outbox_;
  Metrics& metrics_;
  const bool namespaced_;
};

}  // namespace harnessd::server
