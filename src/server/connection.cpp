#include "harnessd/server/connection.hpp"

#include "harnessd/harness/session_registry.hpp"
#include "harnessd/harness/turn_status.hpp"
#include "harnessd/llm/provider.hpp"
#include "harnessd/rpc/params.hpp"
#include "harnessd/server/metrics.hpp"
#include "harnessd/util/secret.hpp"
#include "harnessd/util/version.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

namespace harnessd::server {
namespace asio = boost::asio;
namespace json = boost::json;
using rpc::ErrorCode;
using rpc::RpcError;

namespace {

// GCC 12 cannot keep string literal temporaries across co_await: frames and
// names are built outside co_await expressions.
constexpr std::string_view subagent_finished_method = "subagent.finished";

std::string subagent_started_frame(std::string_view parent, std::string_view child) {
  return rpc::encode_notification(
      "subagent.started", json::object{{"parentSessionId", parent}, {"childSessionId", child}});
}

/// The EventSink of one prompt: notifications go to the prompting
/// connection's Outbox, in order, behind the events' log writes.
class OutboxSink final : public harness::EventSink {
 public:
  OutboxSink(std::shared_ptr<Outbox> outbox, Metrics& metrics)
      : outbox_(std::move(outbox)), metrics_(metrics) {}

  Envelope envelope(std::string_view session_id) override {
    rpc::EventEnvelope envelope = rpc::session_event_envelope(session_id);
    return Envelope{std::move(envelope.before), std::move(envelope.after)};
  }

  asio::awaitable<bool> on_events(std::string block, std::size_t count) override {
    const bool queued = co_await outbox_->push(std::move(block), count);
    if (queued) metrics_.notifications_queued(count);
    co_return queued;
  }

  asio::awaitable<void> on_subagent_started(std::string_view parent, std::string_view child) override {
    std::string frame = subagent_started_frame(parent, child);
    co_await push(std::move(frame));
  }

  asio::awaitable<void> on_subagent_finished(json::object info) override {
    std::string frame = rpc::encode_notification(subagent_finished_method, info);
    co_await push(std::move(frame));
  }

 private:
  asio::awaitable<void> push(std::string frame) {
    frame += '\n';
    const bool queued = co_await outbox_->push(std::move(frame));
    if (queued) metrics_.notifications_queued(1);
  }

  std::shared_ptr<Outbox> outbox_;
  Metrics& metrics_;
};

}  // namespace

Connection::Connection(Strand strand, std::unique_ptr<transport::FrameTransport> transport,
                       ServerContext& context, bool authenticated)
    : strand_(std::move(strand)),
      transport_(std::move(transport)),
      context_(context),
      outbox_(std::make_shared<Outbox>(strand_, context.config.outbox_max_bytes)),
      progress_(util::Wakeup::create(strand_)),
      write_deadline_(strand_),
      quiet_deadline_(strand_),
      peer_(transport_->peer()),
      authenticated_(authenticated) {}

asio::awaitable<void> Connection::run() {
  const transport::TransportKind kind = transport_->kind();
  context_.metrics.connection_opened(kind);
  spdlog::info("{}: connected", peer_);
  asio::co_spawn(strand_, writer(), asio::detached);
  // stdio has one client that owns the process: no timeouts there.
  if (kind != transport::TransportKind::stdio) arm_quiet_deadline(context_.config.handshake_timeout);

  const std::size_t max_inflight = context_.config.max_inflight_requests;
  bool peer_finished = false;
  for (;;) {
    // Backpressure on a client that pipelines faster than requests finish.
    while (inflight_ >= max_inflight) co_await progress_->wait();
    transport::ReadResult read = co_await transport_->read_frame();
    if (read.kind == transport::ReadResult::Kind::end) {
      peer_finished = !stopping_;
      break;
    }
    if (read.kind == transport::ReadResult::Kind::oversized) {
      spdlog::warn("{}: frame over {} bytes refused", peer_, context_.config.max_frame_bytes);
      context_.metrics.request_answered("other", static_cast<int>(ErrorCode::invalid_request));
      // Built outside the co_await: GCC 12 double-frees temporaries that
      // live across a suspension point.
      const rpc::ErrorReply oversized{nullptr, ErrorCode::invalid_request,
                                      "Invalid Request: frame exceeds " +
                                          std::to_string(context_.config.max_frame_bytes) + " bytes",
                                      nullptr};
      std::string frame = rpc::encode_error(oversized);
      co_await push(std::move(frame));
      continue;
    }
    context_.metrics.bytes_read(read.frame.size());
    if (kind != transport::TransportKind::stdio && initialized_ && context_.config.idle_timeout.count() > 0) {
      arm_quiet_deadline(context_.config.idle_timeout);
    }
    rpc::Decoded decoded = rpc::decode_frame(read.frame);
    if (auto* request = std::get_if<rpc::Request>(&decoded)) {
      ++inflight_;
      asio::co_spawn(strand_, handle(std::move(*request)), asio::detached);
    } else if (auto* error = std::get_if<rpc::ErrorReply>(&decoded)) {
      context_.metrics.request_answered("other", static_cast<int>(error->code));
      std::string frame = rpc::encode_error(*error);
      co_await push(std::move(frame));
    } else {
      spdlog::debug("{}: ignored a response or notification frame", peer_);
    }
  }

  quiet_deadline_.cancel();
  // stdin EOF is a shutdown: running turns finish. A network peer that went
  // away cannot read their output, so its turns are cancelled.
  if (peer_finished && kind != transport::TransportKind::stdio) cancel_own_turns("connection closed");
  while (inflight_ > 0) co_await progress_->wait();
  outbox_->close();
  while (!writer_done_) co_await progress_->wait();
  co_await transport_->close();
  context_.metrics.connection_closed(kind);
  spdlog::info("{}: closed", peer_);
}

void Connection::stop() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->stopping_) return;
    self->stopping_ = true;
    self->cancel_own_turns("shutdown");
    self->transport_->stop_reading();
  });
}

asio::awaitable<void> Connection::writer() {
  std::vector<std::string> batch;
  std::uint64_t frames_before = 0;
  auto self = shared_from_this();
  while (co_await outbox_->take(batch)) {
    std::size_t bytes = 0;
    for (const std::string& block : batch) bytes += block.size();
    const std::uint64_t frames = outbox_->frames_taken() - frames_before;
    frames_before = outbox_->frames_taken();
    // A client that stops reading is cut off rather than holding memory
    // forever; one that reads slowly but steadily is not.
    writing_ = true;
    arm_write_deadline(transport_->bytes_written());
    bool failed = false;
    try {
      co_await transport_->write_frames(batch);
    } catch (const std::exception& e) {
      spdlog::info("{}: write failed: {}", peer_, e.what());
      failed = true;
    }
    writing_ = false;
    write_deadline_.cancel();
    if (failed) {
      outbox_->abort();
      transport_->force_close();
      break;
    }
    context_.metrics.frames_written(frames, bytes);
    batch.clear();
  }
  writer_done_ = true;
  progress_->notify();
}

void Connection::arm_quiet_deadline(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return;
  quiet_deadline_.expires_after(timeout);
  quiet_deadline_.async_wait([self = shared_from_this(), timeout](boost::system::error_code ec) {
    if (ec || self->stopping_) return;
    if (!self->initialized_ || !self->authenticated_) {
      spdlog::info("{}: no initialize within {} ms, closing", self->peer_, timeout.count());
      self->transport_->force_close();
      return;
    }
    const auto idle = self->context_.config.idle_timeout;
    if (idle.count() <= 0) return;
    if (self->inflight_ > 0) {
      self->arm_quiet_deadline(idle);  // a running prompt is not idleness
      return;
    }
    spdlog::info("{}: idle for {} ms, closing", self->peer_, idle.count());
    self->transport_->force_close();
  });
}

void Connection::arm_write_deadline(std::uint64_t bytes_at_start) {
  write_deadline_.expires_after(context_.config.write_timeout);
  write_deadline_.async_wait([self = shared_from_this(), bytes_at_start](boost::system::error_code ec) {
    // A wake-up that was already queued when the write ended is stale.
    if (ec || !self->writing_) return;
    const std::uint64_t now = self->transport_->bytes_written();
    if (now != bytes_at_start) {
      self->arm_write_deadline(now);  // progress: a new period starts
      return;
    }
    spdlog::warn("{}: accepted no bytes for {} ms, closing", self->peer_, self->context_.config.write_timeout.count());
    self->transport_->force_close();
  });
}

asio::awaitable<void> Connection::push(std::string frame) {
  frame += '\n';
  co_await outbox_->push(std::move(frame));
}

void Connection::request_finished() {
  --inflight_;
  progress_->notify();
}

asio::awaitable<void> Connection::handle(rpc::Request request) {
  std::string reply;
  int code = 0;
  try {
    json::value result = co_await call(request);
    reply = rpc::encode_result(request.id, result);
  } catch (const RpcError& e) {
    code = static_cast<int>(e.code());
    reply = rpc::encode_error({request.id, e.code(), e.what(), e.data()});
  } catch (const std::exception& e) {
    code = static_cast<int>(ErrorCode::internal_error);
    spdlog::error("{}: {} failed: {}", peer_, request.method, e.what());
    reply = rpc::encode_error({request.id, ErrorCode::internal_error, e.what(), nullptr});
  }
  context_.metrics.request_answered(request.method, code);
  co_await push(std::move(reply));
  if (code == static_cast<int>(ErrorCode::unauthorized) ||
      (request.method == "shutdown" && code == 0)) {
    // Answered; the connection ends once everything queued is written.
    stopping_ = true;
    transport_->stop_reading();
  }
  request_finished();
}

asio::awaitable<json::value> Connection::call(const rpc::Request& request) {
  const std::string& method = request.method;
  if (!authenticated_) {
    const json::value* token = method == "initialize" && request.params.is_object()
                                   ? request.params.get_object().if_contains("authToken")
                                   : nullptr;
    const bool token_ok = !auth_refused_ && token != nullptr && token->is_string() &&
                          util::same_secret(token->get_string(), *context_.config.auth_token);
    if (!token_ok) {
      // One refusal ends the connection: later requests get no second try.
      if (!auth_refused_) spdlog::warn("{}: refused: missing or wrong authToken", peer_);
      auth_refused_ = true;
      throw RpcError(ErrorCode::unauthorized, "unauthorized");
    }
    authenticated_ = true;
  }
  if (method == "shutdown") {
    json::value result = co_await shutdown();
    co_return result;
  }
  if (shutting_down_) throw RpcError(ErrorCode::shutting_down, "shutting down");
  if (method == "initialize") co_return initialize(request.params);
  if (method == "session/prompt" || method == "session/cancel") {
    if (!initialized_) throw RpcError(ErrorCode::not_initialized, "not initialized");
    json::value result;
    if (method == "session/prompt") {
      result = co_await prompt(request.params);
    } else {
      result = co_await cancel(request.params);
    }
    co_return result;
  }
  throw RpcError(ErrorCode::method_not_found, "method not found: " + method);
}

json::value Connection::initialize(const json::value& params) {
  if (initialized_) throw RpcError(ErrorCode::invalid_request, "already initialized");
  rpc::InitializeParams p = rpc::parse_initialize_params(params);
  const std::string provider_name = p.provider.value_or(context_.config.default_provider);
  llm::Provider* provider = context_.providers.find(provider_name);
  if (provider == nullptr) {
    std::string message = "no adapter registered for provider \"" + provider_name + "\"";
    if (provider_name == "deepseek") message += " (start harnessd with DEEPSEEK_API_KEY set)";
    throw RpcError(ErrorCode::invalid_params, message);
  }
  if (p.cwd) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(*p.cwd, ec);
    if (ec) throw RpcError(ErrorCode::invalid_params, "params.cwd: " + ec.message());
    cwd_ = absolute.lexically_normal().string();
  } else {
    cwd_ = context_.config.default_cwd;
  }
  provider_ = provider;
  model_ = p.model.value_or(provider->default_model());
  max_tokens_ = p.max_tokens;
  initialized_ = true;
  // The handshake is done: from now on only the idle timeout applies.
  quiet_deadline_.cancel();
  arm_quiet_deadline(context_.config.idle_timeout);

  json::array providers;
  for (const std::string& name : context_.providers.names()) providers.push_back(json::string(name));
  return json::object{
      {"serverInfo", json::object{{"name", util::server_name},
                                  {"version", util::version},
                                  {"implementation", "harnessd"}}},
      {"protocolVersion", util::protocol_version},
      {"capabilities",
       json::object{{"providers", std::move(providers)},
                    {"methods", json::array{"initialize", "session/prompt", "session/cancel", "shutdown"}}}}};
}

asio::awaitable<json::value> Connection::prompt(const json::value& params) {
  rpc::PromptParams p = rpc::parse_prompt_params(params);
  if (stopping_) throw RpcError(ErrorCode::shutting_down, "shutting down");
  std::shared_ptr<harness::Session> session = context_.sessions.get_or_create(p.session_id);
  // Decided here, on any thread, without waiting for the session's strand:
  // a busy session answers at once even while its turn holds the strand.
  if (!session->try_reserve()) {
    context_.sessions.stats().overlap_rejections.fetch_add(1, std::memory_order_relaxed);
    throw RpcError(ErrorCode::session_busy, "session already has an active prompt: " + p.session_id,
                   json::object{{"sessionId", p.session_id}});
  }

  harness::PromptInput input;
  input.content = std::move(p.content_blocks);
  input.provider = provider_;
  input.model = model_;
  input.max_tokens = max_tokens_;
  input.cwd = cwd_;
  input.owner = this;
  input.admit = true;

  OutboxSink sink(outbox_, context_.metrics);
  ++prompting_[session];
  struct Done {
    Connection& c;
    const std::shared_ptr<harness::Session>& s;
    ~Done() {
      if (--c.prompting_[s] == 0) c.prompting_.erase(s);
      c.progress_->notify();
    }
  } done{*this, session};

  harness::PromptOutcome outcome = co_await asio::co_spawn(
      session->strand(), session->prompt(std::move(input), sink), asio::use_awaitable);
  // Over the cap of open logs: the least recently used idle sessions go now.
  if (context_.sessions.size() > context_.sessions.options().max_open_logs) context_.sessions.evict_idle();
  if (outcome.overloaded) {
    throw RpcError(ErrorCode::overloaded, "server overloaded",
                   json::object{{"retryAfterMs", outcome.retry_after_ms}});
  }
  const bool max_tokens_ok = context_.sessions.options().max_tokens_as_success;
  json::object result;
  result["status"] = harness::status_for(outcome.reason, max_tokens_ok);
  result["reason"] = std::move(outcome.reason);
  co_return result;
}

asio::awaitable<json::value> Connection::cancel(const json::value& params) {
  rpc::SessionIdParams p = rpc::parse_session_id_params(params);
  std::shared_ptr<harness::Session> session = context_.sessions.find(p.session_id);
  const bool cancelled = session && session->cancel("cancelled", nullptr);
  json::object result;
  result["cancelled"] = cancelled;
  co_return result;
}

asio::awaitable<json::value> Connection::shutdown() {
  shutting_down_ = true;
  ++shutdowns_inflight_;
  // Every other request (running turns included) is answered first, so
  // this answer is the connection's last frame.
  while (inflight_ > shutdowns_inflight_) co_await progress_->wait();
  --shutdowns_inflight_;
  json::object result;
  co_return result;
}

void Connection::cancel_own_turns(const std::string& why) {
  for (const auto& [session, count] : prompting_) session->cancel(why, this);
}

}  // namespace harnessd::server
