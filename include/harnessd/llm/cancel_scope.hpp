// Cancellation of one running turn. Lives on the session strand: the turn
// and whoever cancels it both run there, so no locks are needed.
#pragma once

#include <functional>
#include <string>
#include <utility>

namespace harnessd::llm {

/// Not thread-safe: every call happens on the owning session's strand.
class CancelScope {
 public:
  bool cancelled() const noexcept { return cancelled_; }
  const std::string& reason() const noexcept { return reason_; }

  /// Marks the scope cancelled and runs the current hook (e.g. cancels a
  /// timer or closes a socket) so a pending wait ends at once.
  void cancel(std::string reason) {
    if (cancelled_) return;
    cancelled_ = true;
    reason_ = std::move(reason);
    if (auto hook = std::exchange(hook_, nullptr)) hook();
  }

  /// Installs what cancel() must interrupt; cleared by the RAII guard below.
  void set_hook(std::function<void()> hook) { hook_ = std::move(hook); }
  void clear_hook() { hook_ = nullptr; }

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
  bool cancelled_ = false;
  std::string reason_;
  std::function<void()> hook_;
};

}  // namespace harnessd::llm
