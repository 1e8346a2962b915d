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

void CancelScope::State::run_hooks() {
  // Each hook runs once; one may remove others (its wait ends) meanwhile.
  std::map<std::uint64_t, std::function<void()>> current = std::exchange(hooks, {});
  for (auto& [key, hook] : current) {
    if (hook) hook();
  }
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
    state_->run_hooks();
  } else {
    boost::asio::post(*strand_, [state = state_] { state->run_hooks(); });
  }
  return true;
}

std::uint64_t CancelScope::add_hook(std::function<void()> hook) {
  const std::uint64_t key = ++state_->next_key;
  state_->hooks.emplace(key, std::move(hook));
  return key;
}

void CancelScope::remove_hook(std::uint64_t key) { state_->hooks.erase(key); }

}  // namespace harnessd::llm
