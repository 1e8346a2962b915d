// For callers without coroutines: a Client on its own io_context and
// background thread, each call returning a std::future. Tools, tests and
// plain C++ programs use this; the CLI and servers use Client directly.
#pragma once

#include "harnessd/client/client.hpp"
#include "harnessd/client/harness.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace harnessd::client {

/// Thread-safe: every method may be called from any thread. Notification
/// handlers run on the background thread.
class BlockingClient {
 public:
  /// Starts `harnessd --stdio` (see spawn_stdio). Throws when it cannot start.
  static std::unique_ptr<BlockingClient> spawn(SpawnOptions options);
  /// Connects to tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT[/?access_token=...]
  /// or wss://... (see connect_url). Throws std::invalid_argument, ClientError
  /// (CertificateError for an untrusted certificate) or boost::system::system_error.
  static std::unique_ptr<BlockingClient> connect(std::string url);
  /// The same with `options` for tls:// and wss:// (a CA file, ...).
  static std::unique_ptr<BlockingClient> connect(std::string url, ConnectOptions options);

  /// Closes gracefully (bounded) and joins the background thread.
  ~BlockingClient();
  BlockingClient(const BlockingClient&) = delete;
  BlockingClient& operator=(const BlockingClient&) = delete;

  std::future<protocol::InitializeResult> initialize(protocol::InitializeParams params = {});
  std::future<boost::json::value> request(std::string method, boost::json::value params);
  std::future<protocol::PromptResult> session_prompt(std::string session_id, std::string text);
  std::future<bool> session_cancel(std::string session_id);
  std::future<protocol::DecisionResult> session_approve(std::string session_id, std::string approval_id,
                                                        protocol::ApprovalOutcome outcome,
                                                        std::optional<std::string> message = std::nullopt);
  std::future<protocol::DecisionResult> session_answer(std::string session_id, std::string question_id,
                                                       std::vector<protocol::Answer> answers);
  std::future<void> shutdown();
  std::future<protocol::ListResult> session_list(protocol::ListParams params = {});
  std::future<protocol::EventsResult> session_events(std::string session_id, std::int64_t after_seq = -1,
                                                     std::int64_t limit = 0);
  std::future<protocol::DeleteResult> session_delete(std::string session_id);
  /// `on_event` runs on the background thread (see Client::session_subscribe).
  std::future<SessionSubscription> session_subscribe(std::string session_id, std::optional<std::int64_t> after_seq,
                                                     NotificationHandler on_event);
  std::future<bool> session_unsubscribe(std::string session_id);
  std::future<void> close();
  Subscription subscribe(std::string session_id, NotificationHandler handler);
  ClientStats stats();

  /// The underlying client; use it only from coroutines on executor().
  Client& client() { return *client_; }
  boost::asio::any_io_executor executor() { return io_.get_executor(); }

 private:
  BlockingClient();
  void attach(std::unique_ptr<ClientTransport> transport);

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::optional<Client> client_;
  std::thread thread_;
};

/// Harness::run for a BlockingClient.
class BlockingHarness {
 public:
  explicit BlockingHarness(BlockingClient& client) : client_(client), harness_(client.client()) {}

  /// `on_notification` runs on the client's background thread.
  std::future<TurnResult> run(std::string session_id, std::string input, NotificationHandler on_notification = {});

 private:
  BlockingClient& client_;
  Harness harness_;
};

}  // namespace harnessd::client
