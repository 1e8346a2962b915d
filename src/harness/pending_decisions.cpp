#include "harness/pending_decisions.hpp"

#include "llm/cancel_scope.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <set>

namespace harnessd::harness {
namespace asio = boost::asio;
namespace json = boost::json;

PendingDecisions::Ticket PendingDecisions::open(Kind kind, std::string id, const json::array* questions) {
  waiters_.insert_or_assign(id, Waiter{kind, questions, nullptr, {}});
  publish_waiting();
  return Ticket(*this, std::move(id));
}

void PendingDecisions::close(std::string_view id) {
  if (const auto it = waiters_.find(id); it != waiters_.end()) waiters_.erase(it);
  publish_waiting();
}

asio::awaitable<PendingDecisions::Settled> PendingDecisions::Ticket::wait(std::chrono::milliseconds timeout,
                                                                          llm::CancelScope& cancel) {
  const auto it = owner_.waiters_.find(id_);
  Waiter& waiter = it->second;  // opened by open(), erased only by ~Ticket
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor, timeout);
  if (waiter.reply.index() == 0) {
    waiter.timer = &timer;
    {
      // A cancel that came before the hook was in place is seen by the check.
      llm::CancelScope::Hook on_cancel(cancel, [&timer] { timer.cancel(); });
      if (!cancel.cancelled()) co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    waiter.timer = nullptr;
  }
  Settled settled;
  if (waiter.reply.index() != 0) {
    settled.source = protocol::DecisionSource::client;
    settled.reply = std::move(waiter.reply);
  } else if (cancel.cancelled()) {
    settled.source = protocol::DecisionSource::cancel;
  } else {
    settled.source = protocol::DecisionSource::timeout;
  }
  owner_.waiters_.erase(it);  // settled: a second reply finds nothing pending
  owner_.publish_waiting();
  co_return settled;
}

PendingDecisions::Waiter* PendingDecisions::find(Kind kind, std::string_view id) {
  const auto it = waiters_.find(id);
  // Settled already (a second answer before the turn woke) counts as gone.
  if (it == waiters_.end() || it->second.kind != kind || it->second.reply.index() != 0) return nullptr;
  return &it->second;
}

void PendingDecisions::settle(Waiter& waiter) {
  if (waiter.timer != nullptr) waiter.timer->cancel();
}

PendingDecisions::Resolution PendingDecisions::resolve(protocol::ApproveParams reply) {
  Waiter* waiter = find(Kind::approval, reply.approval_id);
  if (waiter == nullptr) return {};
  waiter->reply = std::move(reply);
  settle(*waiter);
  return {.status = Resolution::Status::accepted, .problem = {}};
}

PendingDecisions::Resolution PendingDecisions::resolve(protocol::AnswerParams reply) {
  Waiter* waiter = find(Kind::question, reply.question_id);
  if (waiter == nullptr) return {};
  if (waiter->questions != nullptr) {
    std::string problem = check_answers(*waiter->questions, reply.answers);
    if (!problem.empty()) return {.status = Resolution::Status::invalid, .problem = std::move(problem)};
  }
  waiter->reply = std::move(reply);
  settle(*waiter);
  return {.status = Resolution::Status::accepted, .problem = {}};
}

std::optional<PendingDecisions::Kind> PendingDecisions::waiting() const noexcept {
  const int kind = waiting_.load(std::memory_order_relaxed);
  if (kind < 0) return std::nullopt;
  return static_cast<Kind>(kind);
}

void PendingDecisions::publish_waiting() noexcept {
  waiting_.store(waiters_.empty() ? -1 : static_cast<int>(waiters_.begin()->second.kind), std::memory_order_relaxed);
}

std::string_view to_string(PendingDecisions::Kind kind) {
  return kind == PendingDecisions::Kind::approval ? "approval" : "question";
}

namespace {

const json::object* question_with_id(const json::array& questions, std::string_view id) {
  for (const json::value& q : questions) {
    if (!q.is_object()) continue;
    const json::value* qid = q.get_object().if_contains("id");
    if (qid != nullptr && qid->is_string() && qid->get_string() == id) return &q.get_object();
  }
  return nullptr;
}

bool has_option(const json::object& question, std::string_view label) {
  const json::value* options = question.if_contains("options");
  if (options == nullptr || !options->is_array()) return false;
  return std::any_of(options->get_array().begin(), options->get_array().end(), [&](const json::value& option) {
    const json::value* l = option.is_object() ? option.get_object().if_contains("label") : nullptr;
    return l != nullptr && l->is_string() && l->get_string() == label;
  });
}

}  // namespace

std::string check_answers(const json::array& questions, const std::vector<protocol::Answer>& answers) {
  std::set<std::string_view> seen;
  for (const protocol::Answer& answer : answers) {
    const json::object* question = question_with_id(questions, answer.id);
    if (question == nullptr) return "params.answers: no question has id \"" + answer.id + "\"";
    if (!seen.insert(answer.id).second) return "params.answers: question \"" + answer.id + "\" is answered twice";
    const json::value* multi = question->if_contains("multi_select");
    const bool multi_select = multi != nullptr && multi->is_bool() && multi->get_bool();
    if (!multi_select && answer.selected.size() > 1) {
      return "params.answers: question \"" + answer.id + "\" takes one option";
    }
    for (const std::string& label : answer.selected) {
      if (!has_option(*question, label)) {
        return "params.answers: question \"" + answer.id + "\" has no option \"" + label + "\"";
      }
    }
  }
  return {};
}

}  // namespace harnessd::harness
