#include "server/connection.hpp"

#include "server/metrics.hpp"
#include "server/methods.hpp"
#include "transport/http_sniff.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>

namespace harnessd::server {
namespace asio = boost::asio;
namespace json = boost::json;
using rpc::ErrorCode;
using rpc::RpcError;

namespace {

/// A short id that ties an internal error's answer to its line in the log.
std::string next_error_id() {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t start = static_cast<std::uint64_t>(
      std::chrono::system_clock::now().time_since_epoch().count());
  return fmt::format("{:x}", (start & 0xffffffffffULL) * 1000 + counter.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace

Connection::Connection(Strand strand, std::unique_ptr<transport::FrameTransport> transport, ServerContext& context,
                       const auth::Principal* principal, std::shared_ptr<void> slot)
    : strand_(std::move(strand)),
      transport_(std::move(transport)),
      context_(context),
      outbox_(std::make_shared<Outbox>(strand_, context.config.outbox_max_bytes)),
      progress_(util::Wakeup::create(strand_)),
      write_deadline_(strand_),
      linger_(strand_),
      quiet_deadline_(strand_),
      peer_(transport_->peer()),
      client_(context, outbox_),
      slot_(std::move(slot)) {
  client_.network = transport_->kind() != transport::TransportKind::stdio;
  // Without credentials every client is the anonymous administrator.
  client_.principal = principal != nullptr || context.config.credentials.required()
                          ? principal
                          : &auth::Credentials::anonymous();
}

asio::awaitable<void> Connection::run() {
  const transport::TransportKind kind = transport_->kind();
  context_.metrics.connection_opened(kind);
  spdlog::info("{}: connected", peer_);
  outbox_->limit_responses(context_.config.max_response_bytes_per_connection, context_.response_budget,
                           context_.config.response_budget_wait);
  asio::co_spawn(strand_, writer(), asio::detached);
  // stdio has one client that owns the process: no timeouts there.
  if (kind != transport::TransportKind::stdio) arm_quiet_deadline(context_.config.handshake_timeout);

  const std::size_t max_inflight = context_.config.max_inflight_requests;
  // Network peers prove they speak JSON-RPC before anything else; the stdio
  // client is the process that started us.
  const bool guarded = kind != transport::TransportKind::stdio;
  bool peer_finished = false;
  for (;;) {
    // Backpressure on a client that pipelines faster than requests finish.
    while (inflight_ >= max_inflight) co_await progress_->wait();
    transport::ReadResult read = co_await transport_->read_frame();
    if (read.kind == transport::ReadResult::Kind::end) {
      peer_finished = !client_.stopping;
      break;
    }
    if (read.kind == transport::ReadResult::Kind::oversized) {
      spdlog::warn("{}: frame over {} bytes refused", peer_, context_.config.max_frame_bytes);
      context_.metrics.request_answered(std::nullopt, static_cast<int>(ErrorCode::invalid_request));
      // Built outside the co_await: GCC 12 double-frees temporaries that
      // live across a suspension point.
      const rpc::ErrorResponse oversized{nullptr, ErrorCode::invalid_request,
                                      "Invalid Request: frame exceeds " +
                                          std::to_string(context_.config.max_frame_bytes) + " bytes",
                                      nullptr};
      std::string frame = rpc::encode_error(oversized);
      co_await push(std::move(frame));
      if (guarded && !client_.initialized) {
        refused_ = true;
        break;
      }
      continue;
    }
    if (guarded && !client_.initialized && transport::looks_like_http(read.frame)) {
      // No answer: a page that posted here must not read a byte back.
      spdlog::warn("{}: HTTP request on a JSON-RPC listener, closing", peer_);
      refused_ = true;
      break;
    }
    context_.metrics.bytes_read(read.frame.size());
    if (kind != transport::TransportKind::stdio && client_.initialized && context_.config.idle_timeout.count() > 0) {
      arm_quiet_deadline(context_.config.idle_timeout);
    }
    rpc::Decoded decoded = rpc::decode_frame(read.frame);
    if (auto* request = std::get_if<rpc::Request>(&decoded)) {
      ++inflight_;
      asio::co_spawn(strand_, handle(std::move(*request)), asio::detached);
    } else if (auto* invalid = std::get_if<rpc::Invalid>(&decoded); invalid != nullptr && !invalid->response) {
      context_.metrics.request_answered(std::nullopt, static_cast<int>(invalid->error.code));
      std::string frame = rpc::encode_error(invalid->error);
      co_await push(std::move(frame));
      if (guarded && !client_.initialized) {
        spdlog::info("{}: not JSON-RPC before initialize, closing", peer_);
        refused_ = true;
        break;
      }
    } else if (guarded && !client_.initialized) {
      spdlog::info("{}: a response or notification before initialize, closing", peer_);
      refused_ = true;
      break;
    } else {
      spdlog::debug("{}: ignored a response or notification frame", peer_);
    }
  }
  if (refused_) transport_->stop_reading();

  quiet_deadline_.cancel();
  client_.end_subscriptions();
  // stdin EOF is a shutdown: running turns finish. A network peer that went
  // away cannot read their output, so its turns are cancelled, unless it
  // asked for them to run on detached.
  if (peer_finished && kind != transport::TransportKind::stdio &&
      client_.on_disconnect == protocol::OnDisconnect::cancel) {
    client_.cancel_turns("connection closed");
  }
  while (inflight_ > 0) co_await progress_->wait();
  client_.end_subscriptions();  // any that a request in flight made meanwhile
  outbox_->close();
  while (!writer_done_) co_await progress_->wait();
  co_await transport_->close();
  context_.metrics.connection_closed(kind);
  spdlog::info("{}: closed", peer_);
}

void Connection::stop() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->client_.stopping) return;
    self->client_.stopping = true;
    self->client_.cancel_turns("shutdown");
    self->transport_->stop_reading();
  });
}

asio::awaitable<void> Connection::writer() {
  std::vector<Block> batch;
  std::vector<std::string_view> views;
  std::uint64_t frames_before = 0;
  auto self = shared_from_this();
  while (co_await outbox_->take(batch)) {
    if (outbox_->took_only_offers() && context_.config.subscriber_linger.count() > 0) {
      // Only subscribed events: they wait a moment, so a busy session's
      // followers get one write per linger instead of one per event.
      linger_.expires_after(context_.config.subscriber_linger);
      boost::system::error_code ignored;
      co_await linger_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
      outbox_->take_ready(batch);
    }
    std::size_t bytes = 0;
    views.clear();
    for (const Block& block : batch) {
      bytes += block->size();
      views.emplace_back(*block);
    }
    const std::uint64_t frames = outbox_->frames_taken() - frames_before;
    frames_before = outbox_->frames_taken();
    // A client that stops reading is cut off rather than holding memory
    // forever; one that reads slowly but steadily is not. The watchdog stays
    // armed across writes: no timer work per write.
    writing_ = true;
    if (!watchdog_armed_) {
      watchdog_armed_ = true;
      watchdog_bytes_ = transport_->bytes_written();
      arm_write_deadline();
    }
    bool failed = false;
    try {
      co_await transport_->write_frames(views);
    } catch (const std::exception& e) {
      spdlog::info("{}: write failed: {}", peer_, e.what());
      failed = true;
    }
    writing_ = false;
    if (failed) {
      outbox_->abort();
      transport_->force_close();
      break;
    }
    context_.metrics.frames_written(frames, bytes);
    batch.clear();
  }
  if (outbox_->overflowed()) {
    // A subscription's events came faster than the peer took them.
    spdlog::warn("{}: more than {} bytes of subscribed events queued, closing", peer_,
                 context_.config.subscriber_max_bytes);
    transport_->force_close();
  }
  write_deadline_.cancel();  // its handler holds the connection
  writer_done_ = true;
  progress_->notify();
}

void Connection::arm_quiet_deadline(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return;
  quiet_deadline_.expires_after(timeout);
  quiet_deadline_.async_wait([self = shared_from_this(), timeout](boost::system::error_code ec) {
    if (ec || self->client_.stopping) return;
    if (!self->client_.initialized || self->client_.principal == nullptr) {
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

void Connection::arm_write_deadline() {
  write_deadline_.expires_after(context_.config.write_timeout);
  write_deadline_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    // No write waiting: the watchdog rests until the next one.
    if (ec || !self->writing_) {
      self->watchdog_armed_ = false;
      return;
    }
    const std::uint64_t now = self->transport_->bytes_written();
    if (now != self->watchdog_bytes_) {
      self->watchdog_bytes_ = now;  // progress: a new period starts
      self->arm_write_deadline();
      return;
    }
    self->watchdog_armed_ = false;
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
  const MethodSpec* spec = find_method(request.method);
  std::string reply;
  int code = 0;
  try {
    const std::string result = co_await call(spec, request);
    reply = rpc::encode_result_json(request.id, result);
  } catch (const RpcError& e) {
    code = static_cast<int>(e.code());
    reply = rpc::encode_error({request.id, e.code(), e.what(), e.data()});
  } catch (const std::exception& e) {
    // The text may hold paths or database errors: it stays in our log, and
    // the client gets an id to quote.
    code = static_cast<int>(ErrorCode::internal_error);
    const std::string error_id = next_error_id();
    spdlog::error("{}: {} failed (error id {}): {}", peer_, request.method, error_id, e.what());
    reply = rpc::encode_error({request.id, ErrorCode::internal_error, "internal error (id " + error_id + ")",
                               json::object{{"errorId", error_id}}});
  }
  context_.metrics.request_answered(spec ? std::optional(spec->method) : std::nullopt, code);
  co_await push(std::move(reply));
  if (code == static_cast<int>(ErrorCode::unauthorized) || (spec != nullptr && spec->answers_last && code == 0)) {
    // Answered; the connection ends once everything queued is written.
    client_.stopping = true;
    transport_->stop_reading();
  }
  request_finished();
}

void Connection::authenticate(const MethodSpec* spec, const rpc::Request& request) {
  const auth::Credentials& credentials = context_.config.credentials;
  const json::value* token = spec != nullptr && spec->authenticates && request.params.is_object()
                                 ? request.params.get_object().if_contains("authToken")
                                 : nullptr;
  const auth::Principal* principal =
      !auth_refused_ && token != nullptr && token->is_string() ? credentials.authenticate(token->get_string())
                                                               : nullptr;
  if (principal == nullptr) {
    // One refusal ends the connection: later requests get no second try.
    if (!auth_refused_) spdlog::warn("{}: refused: missing or wrong authToken", peer_);
    auth_refused_ = true;
    throw RpcError(ErrorCode::unauthorized, "unauthorized");
  }
  client_.principal = principal;
  spdlog::info("{}: authenticated as {}", peer_, principal->name);
}

asio::awaitable<std::string> Connection::call(const MethodSpec* spec, const rpc::Request& request) {
  if (client_.principal == nullptr) authenticate(spec, request);
  if (spec != nullptr && spec->answers_last) {
    shutting_down_ = true;
    // Every other request (running turns included) is answered first, so
    // this answer is the connection's last frame.
    ++shutdowns_inflight_;
    while (inflight_ > shutdowns_inflight_) co_await progress_->wait();
    --shutdowns_inflight_;
  } else {
    if (shutting_down_) throw RpcError(ErrorCode::shutting_down, "shutting down");
    if (spec == nullptr) throw RpcError(ErrorCode::method_not_found, "method not found: " + request.method);
    if (spec->requires_initialize && !client_.initialized) {
      throw RpcError(ErrorCode::not_initialized, "not initialized");
    }
  }
  std::string result = co_await spec->invoke(client_, request.params);
  if (spec->method == protocol::Method::initialize) {
    // The handshake is done: from now on only the idle timeout applies.
    quiet_deadline_.cancel();
    arm_quiet_deadline(context_.config.idle_timeout);
  }
  co_return result;
}

}  // namespace harnessd::server
