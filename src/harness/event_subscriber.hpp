// A follower of one session's events (session/subscribe): it gets every
// event the session logs from the moment it subscribes, in order, without
// ever slowing the turn that makes them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace harnessd::harness {

class TurnOwner;

class EventSubscriber {
 public:
  explicit EventSubscriber(const TurnOwner* owner) : owner_(owner) {}
  virtual ~EventSubscriber() = default;

  /// Called on the session's strand right after `count` events were handed
  /// to the log, in seq order. `block` is the turn's block, wrapped as its
  /// EventSink's envelope says (the server uses one envelope for all), and
  /// shared. Must not wait and must not throw.
  virtual void on_logged(const std::shared_ptr<const std::string>& block, std::size_t count) = 0;

  /// The subscriber's client: its own turns reach it through its prompt,
  /// so they are not delivered here as well.
  const TurnOwner* owner() const noexcept { return owner_; }

 private:
  const TurnOwner* owner_;
};

}  // namespace harnessd::harness
