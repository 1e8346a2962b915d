#include "server/outbox_sink.hpp"

#include "harnessd/rpc/codec.hpp"
#include "harnessd/server/metrics.hpp"

namespace harnessd::server {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// GCC 12 cannot keep string literal temporaries across co_await: frames and
// names are built outside co_await expressions.
constexpr std::string_view subagent_finished_method = "subagent.finished";

std::string subagent_started_frame(std::string_view parent, std::string_view child) {
  return rpc::encode_notification(
      "subagent.started", json::object{{"parentSessionId", parent}, {"childSessionId", child}});
}

}  // namespace

OutboxSink::OutboxSink(std::shared_ptr<Outbox> outbox, Metrics& metrics)
    : outbox_(std::move(outbox)), metrics_(metrics) {}

harness::EventSink::Envelope OutboxSink::envelope(std::string_view session_id) {
  rpc::EventEnvelope envelope = rpc::session_event_envelope(session_id);
  return Envelope{std::move(envelope.before), std::move(envelope.after)};
}

asio::awaitable<bool> OutboxSink::on_events(std::string block, std::size_t count) {
  const bool queued = co_await outbox_->push(std::move(block), count);
  if (queued) metrics_.notifications_queued(count);
  co_return queued;
}

asio::awaitable<void> OutboxSink::on_subagent_started(std::string_view parent, std::string_view child) {
  std::string frame = subagent_started_frame(parent, child);
  co_await push(std::move(frame));
}

asio::awaitable<void> OutboxSink::on_subagent_finished(json::object info) {
  std::string frame = rpc::encode_notification(subagent_finished_method, info);
  co_await push(std::move(frame));
}

asio::awaitable<void> OutboxSink::push(std::string frame) {
  frame += '\n';
  const bool queued = co_await outbox_->push(std::move(frame));
  if (queued) metrics_.notifications_queued(1);
}

}  // namespace harnessd::server
