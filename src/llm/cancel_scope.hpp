// Cancellation of one running turn. cancel() may come from any thread (a
// closing connection, session/cancel, shutdown): the flag is set at once, so
// a turn that never suspends still sees it at its next event, and the hook
// that interrupts a pending wait runs on the session strand.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace harnessd::llm {

/// cancel(), cancelled() and reason() are thread-safe; hooks are installed
/// and cleared on the owning strand only.
class CancelScope {
 public:
  using Strand = boost::asio::strand<boost::asio::any_io_executor>;

  /// Without a strand, hooks run inside cancel() (single-threaded tests).
  CancelScope();
  explicit CancelScope(Strand strand);

  bool cancelled() const noexcept { return state_->phase.load(std::memory_order_acquire) == cancelled_phase; }
  /// Why the scope was cancelled; empty while it is not.
  const std::string& reason() const noexcept;

  /// Marks the scope cancelled (the first reason wins) and runs the current
  /// hook on the strand, so a pending wait (a timer, a socket) ends at once.
  /// Returns false once the turn has settled (see settle()): it ends as it
  /// decided, and a caller must not report it cancelled.
  bool cancel(std::string reason);

  /// The turn decided how it ends (completed, error, ...): later cancels
  /// change nothing. Returns false when a cancel came first; the turn must
  /// then end aborted.
  bool settle();

  /// Installs what cancel() must interrupt; cleared by the RAII guard below.
  void set_hook(std::function<void()> hook);
  void clear_hook();

  /// Keeps a hook installed for the lifetime of one wait.
  class Hook {
   public:
    Hook(CancelScope& scope, std::function<void()> hook) : scope_(scope) {
      scope_.set_hook(std::move(hook));
    }
    ~Hook() { scope_.clear_hook(); }
    Hook(const Hook&) = delete;
    Hook& operator=(const Hook&) = delete;

   private:
    CancelScope& scope_;
  };

 private:
  static constexpr int cancelled_phase = 2;
  static constexpr int settled_phase = 3;
  /// Shared with a hook run posted to the strand, which may outlive the scope.
  struct State {
    std::atomic<int> phase{0};  ///< 0 running, 1 being cancelled, 2 cancelled, 3 settled
    std::string reason;         ///< written once, before phase becomes 2
    std::function<void()> hook; ///< strand-only
    void run_hook();
  };
  std::shared_ptr<State> state_;
  std::optional<Strand> strand_;
};

}  // namespace harnessd::llm
