// BlockingClient: each call co_spawns the coroutine API onto the private
// io_context and hands back its std::future.
#include "harnessd/client/blocking_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>

namespace harnessd::client {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

asio::awaitable<ClientStats> read_stats(Client& client) { co_return client.stats(); }

}  // namespace

BlockingClient::BlockingClient() : work_(io_.get_executor()) {
  thread_ = std::thread([this] { io_.run(); });
}

BlockingClient::~BlockingClient() {
  if (client_) {
    try {
      close().get();
    } catch (const std::exception&) {
      // Closing is best effort; the connection is gone either way.
    }
    client_.reset();
  }
  work_.reset();
  io_.stop();
  thread_.join();
}

void BlockingClient::attach(std::unique_ptr<ClientTransport> transport) {
  client_.emplace(io_.get_executor(), std::move(transport));
}

std::unique_ptr<BlockingClient> BlockingClient::spawn(SpawnOptions options) {
  std::unique_ptr<BlockingClient> self(new BlockingClient());
  self->attach(spawn_stdio(self->io_.get_executor(), options));
  return self;
}

std::unique_ptr<BlockingClient> BlockingClient::connect(std::string url) { return connect(std::move(url), {}); }

std::unique_ptr<BlockingClient> BlockingClient::connect(std::string url, ConnectOptions options) {
  std::unique_ptr<BlockingClient> self(new BlockingClient());
  std::future<std::unique_ptr<ClientTransport>> transport = asio::co_spawn(
      self->io_, connect_url(self->io_.get_executor(), std::move(url), std::move(options)), asio::use_future);
  self->attach(transport.get());
  return self;
}

std::future<protocol::InitializeResult> BlockingClient::initialize(protocol::InitializeParams params) {
  return asio::co_spawn(io_, client_->initialize(std::move(params)), asio::use_future);
}

std::future<json::value> BlockingClient::request(std::string method, json::value params) {
  return asio::co_spawn(io_, client_->request(std::move(method), std::move(params)), asio::use_future);
}

std::future<protocol::PromptResult> BlockingClient::session_prompt(std::string session_id, std::string text) {
  return asio::co_spawn(io_, client_->session_prompt(std::move(session_id), std::move(text)), asio::use_future);
}

std::future<bool> BlockingClient::session_cancel(std::string session_id) {
  return asio::co_spawn(io_, client_->session_cancel(std::move(session_id)), asio::use_future);
}

std::future<protocol::DecisionResult> BlockingClient::session_approve(std::string session_id,
                                                                     std::string approval_id,
                                                                     protocol::ApprovalOutcome outcome,
                                                                     std::optional<std::string> message) {
  return asio::co_spawn(
      io_, client_->session_approve(std::move(session_id), std::move(approval_id), outcome, std::move(message)),
      asio::use_future);
}

std::future<protocol::DecisionResult> BlockingClient::session_answer(std::string session_id, std::string question_id,
                                                                     std::vector<protocol::Answer> answers) {
  return asio::co_spawn(io_, client_->session_answer(std::move(session_id), std::move(question_id), std::move(answers)),
                        asio::use_future);
}

std::future<void> BlockingClient::shutdown() { return asio::co_spawn(io_, client_->shutdown(), asio::use_future); }

std::future<protocol::ListResult> BlockingClient::session_list(protocol::ListParams params) {
  return asio::co_spawn(io_, client_->session_list(std::move(params)), asio::use_future);
}

std::future<protocol::EventsResult> BlockingClient::session_events(std::string session_id, std::int64_t after_seq,
                                                                   std::int64_t limit) {
  return asio::co_spawn(io_, client_->session_events(std::move(session_id), after_seq, limit), asio::use_future);
}

std::future<protocol::DeleteResult> BlockingClient::session_delete(std::string session_id) {
  return asio::co_spawn(io_, client_->session_delete(std::move(session_id)), asio::use_future);
}

std::future<SessionSubscription> BlockingClient::session_subscribe(std::string session_id,
                                                                   std::optional<std::int64_t> after_seq,
                                                                   NotificationHandler on_event) {
  return asio::co_spawn(io_, client_->session_subscribe(std::move(session_id), after_seq, std::move(on_event)),
                        asio::use_future);
}

std::future<bool> BlockingClient::session_unsubscribe(std::string session_id) {
  return asio::co_spawn(io_, client_->session_unsubscribe(std::move(session_id)), asio::use_future);
}

std::future<void> BlockingClient::close() { return asio::co_spawn(io_, client_->close(), asio::use_future); }

Subscription BlockingClient::subscribe(std::string session_id, NotificationHandler handler) {
  return client_->subscribe(std::move(session_id), std::move(handler));
}

ClientStats BlockingClient::stats() { return asio::co_spawn(io_, read_stats(*client_), asio::use_future).get(); }

std::future<TurnResult> BlockingHarness::run(std::string session_id, std::string input,
                                             NotificationHandler on_notification) {
  return asio::co_spawn(client_.executor(),
                        harness_.run(std::move(session_id), std::move(input), std::move(on_notification)),
                        asio::use_future);
}

}  // namespace harnessd::client
