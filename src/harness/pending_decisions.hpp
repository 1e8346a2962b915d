// The decisions a session's running turn waits for from its clients: an
// approval of a tool call, or the answers to ask_user_question. The turn
// waits on its own strand without holding a thread; session/approve and
// session/answer settle the wait from any connection that may see the
// session (they hop onto the strand first); the timeout and the turn's
// cancel settle it otherwise.
#pragma once

#include "harnessd/protocol/decisions.hpp"
#include "harnessd/protocol/messages.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/array.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace harnessd::llm {
class CancelScope;
}

namespace harnessd::harness {

/// Strand-only, except waiting().
class PendingDecisions {
 public:
  enum class Kind { approval, question };

  /// How a wait ended; `reply` holds the client's params when source is client.
  struct Settled {
    protocol::DecisionSource source = protocol::DecisionSource::timeout;
    std::variant<std::monostate, protocol::ApproveParams, protocol::AnswerParams> reply;
  };

  /// What session/approve or session/answer gets back.
  struct Resolution {
    enum class Status { accepted, not_pending, invalid } status = Status::not_pending;
    std::string problem;  ///< with invalid: what is wrong with the reply
  };

  /// One decision a turn is about to wait for. Opened before its request
  /// event is sent, so a reply that comes before the wait begins is kept;
  /// closed (forgotten) when it goes out of scope.
  class Ticket {
   public:
    Ticket(PendingDecisions& owner, std::string id) : owner_(owner), id_(std::move(id)) {}
    ~Ticket() { owner_.close(id_); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

    /// Waits until a client settles it, `timeout` passes, or `cancel` is
    /// cancelled.
    boost::asio::awaitable<Settled> wait(std::chrono::milliseconds timeout, llm::CancelScope& cancel);

   private:
    PendingDecisions& owner_;
    const std::string id_;
  };

  /// Opens `id`. For a question, `questions` (alive while the ticket is)
  /// is what answers are checked against.
  Ticket open(Kind kind, std::string id, const boost::json::array* questions = nullptr);

  Resolution resolve(protocol::ApproveParams reply);
  Resolution resolve(protocol::AnswerParams reply);

  /// Thread-safe: what the turn waits for now, if anything (session/list).
  std::optional<Kind> waiting() const noexcept;

 private:
  struct Waiter {
    Kind kind;
    const boost::json::array* questions;
    boost::asio::steady_timer* timer = nullptr;  ///< while the turn waits
    std::variant<std::monostate, protocol::ApproveParams, protocol::AnswerParams> reply;
  };
  Waiter* find(Kind kind, std::string_view id);
  void settle(Waiter& waiter);
  void close(std::string_view id);
  void publish_waiting() noexcept;

  std::map<std::string, Waiter, std::less<>> waiters_;
  std::atomic<int> waiting_{-1};  ///< a Kind, or -1
};

/// "approval" or "question".
std::string_view to_string(PendingDecisions::Kind kind);

/// Why `answers` do not fit `questions` (ids, option labels, single
/// choice), or "" when they do.
std::string check_answers(const boost::json::array& questions, const std::vector<protocol::Answer>& answers);

}  // namespace harnessd::harness
