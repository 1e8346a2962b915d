// Cancellation of one running turn. cancel() may come from any thread (a
// closing connection, session/cancel, shutdown): the flag is set at once, so
// a turn that never suspends still sees it at its next event, and the hook
// that interrupts a pending wait runs on the session strand.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <cstdint>
#include <map>
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

  /// Installs what cancel() must interrupt, beside any others (calls of one
  /// step that wait at once each have their own); removed by the RAII guard
  /// below. Returns the hook's key.
  std::uint64_t add_hook(std::function<void()> hook);
  void remove_hook(std::uint64_t key);

  /// Keeps a hook installed for the lifetime of one wait.
  class Hook {
   public:
    Hook(CancelScope& scope, std::function<void()> hook) : scope_(scope), key_(scope.add_hook(std::move(hook))) {}
    ~Hook() { scope_.remove_hook(key_); }
    Hook(const Hook&) = delete;
    Hook& operator=(const Hook&) = delete;

   private:
    CancelScope& scope_;
    std::uint64_t key_;
  };

 private:
  static constexpr int cancelled_phase = 2;
  static constexpr int settled_phase = 3;
  /// Shared with a hook run posted to the strand, which may outlive the scope.
  struct State {
    std::atomic<int> phase{0};  ///< 0 running, 1 being cancelled, 2 cancelled, 3 settled
    std::string reason;         ///< written once, before phase becomes 2
    std::map<std::uint64_t, std::function<void()>> hooks;  ///< strand-only
    std::uint64_t next_key = 0;                            ///< strand-only
    void run_hooks();
  };
  std::shared_ptr<State> state_;
  std::optional<Strand> strand_;
};

}  // namespace harnessd::llm
