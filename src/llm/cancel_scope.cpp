#include "llm/cancel_scope.hpp"

#include <boost/asio/post.hpp>

#include <utility>

namespace harnessd::llm {

CancelScope::CancelScope() : state_(std::make_shared<State>()) {}

CancelScope::CancelScope(Strand strand) : state_(std::make_shared<State>()), strand_(std::move(strand)) {}

const std::string& CancelScope::reason() const noexcept {
  static const std::string none;
  return cancelled() ? state_->reason : none;
}

void CancelScope::State::run_hook() {
  if (auto current = std::exchange(hook, nullptr)) current();
}

bool CancelScope::settle() {
  int expected = 0;
  return state_->phase.compare_exchange_strong(expected, settled_phase, std::memory_order_acq_rel) ||
         expected == settled_phase;
}

bool CancelScope::cancel(std::string reason) {
  int expected = 0;
  if (!state_->phase.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    return expected != settled_phase;  // already cancelled (or being): still true
  }
  state_->reason = std::move(reason);
  state_->phase.store(cancelled_phase, std::memory_order_release);
  if (!strand_ || strand_->running_in_this_thread()) {
    state_->run_hook();
  } else {
    boost::asio::post(*strand_, [state = state_] { state->run_hook(); });
  }
  return true;
}

void CancelScope::set_hook(std::function<void()> hook) { state_->hook = std::move(hook); }

void CancelScope::clear_hook() { state_->hook = nullptr; }

}  // namespace harnessd::llm
