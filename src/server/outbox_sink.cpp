#include "server/outbox_sink.hpp"

#include "auth/credentials.hpp"
#include "harnessd/rpc/codec.hpp"
#include "server/metrics.hpp"

namespace harnessd::server {
namespace asio = boost::asio;
namespace json = boost::json;

OutboxSink::OutboxSink(std::shared_ptr<Outbox> outbox, Metrics& metrics, bool namespaced)
    : outbox_(std::move(outbox)), metrics_(metrics), namespaced_(namespaced) {}

std::string OutboxSink::shown(std::string_view session_id) const {
  return std::string(auth::notified_id(namespaced_, session_id));
}

harness::EventSink::Envelope OutboxSink::envelope(std::string_view session_id) {
  rpc::EventEnvelope envelope = rpc::session_event_envelope(shown(session_id));
  return Envelope{std::move(envelope.before), std::move(envelope.after)};
}

asio::awaitable<bool> OutboxSink::on_events(std::shared_ptr<const std::string> block, std::size_t count) {
  const bool queued = co_await outbox_->push(std::move(block), count);
  if (queued) metrics_.notifications_queued(count);
  co_return queued;
}

// Frames are built in named locals before the co_await (GCC 12 rule 2).
asio::awaitable<void> OutboxSink::on_subagent_started(protocol::SubagentStarted note) {
  note.parent_session_id = shown(note.parent_session_id);
  note.child_session_id = shown(note.child_session_id);
  std::string frame = rpc::encode_notification(protocol::subagent_started_method, json::value_from(note));
  co_await push(std::move(frame));
}

asio::awaitable<void> OutboxSink::on_subagent_finished(protocol::SubagentFinished note) {
  note.parent_session_id = shown(note.parent_session_id);
  note.child_session_id = shown(note.child_session_id);
  std::string frame = rpc::encode_notification(protocol::subagent_finished_method, json::value_from(note));
  co_await push(std::move(frame));
}

asio::awaitable<void> OutboxSink::push(std::string frame) {
  frame += '\n';
  const bool queued = co_await outbox_->push(std::move(frame));
  if (queued) metrics_.notifications_queued(1);
}

}  // namespace harnessd::server
