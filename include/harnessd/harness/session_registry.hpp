// All sessions of the daemon by id, shared by every connection, so a busy
// session is busy for everyone. Sessions live as long as the daemon.
#pragma once

#include "harnessd/harness/session.hpp"
#include "harnessd/harness/turn_stats.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace harnessd::store {
class EventStore;
}

namespace harnessd::harness {

struct HarnessOptions {
  int max_steps_per_turn = 32;
  int max_delegation_depth = 3;
  bool max_tokens_as_success = false;
};

/// Thread-safe.
class SessionRegistry {
 public:
  SessionRegistry(boost::asio::any_io_executor executor, store::EventStore& store,
                  HarnessOptions options);

  /// The session with this id, created (not yet loaded) when unknown.
  std::shared_ptr<Session> get_or_create(std::string_view id);
  /// The session with this id, or null.
  std::shared_ptr<Session> find(std::string_view id) const;
  /// A new child session with a fresh id.
  std::shared_ptr<Session> create_child(const Session& parent);

  std::size_t size() const;
  store::EventStore& store() noexcept { return store_; }
  const HarnessOptions& options() const noexcept { return options_; }
  TurnStats& stats() noexcept { return stats_; }

 private:
  std::shared_ptr<Session> make_session(std::string id, std::optional<std::string> parent, int depth);

  boost::asio::any_io_executor executor_;
  store::EventStore& store_;
  const HarnessOptions options_;
  TurnStats stats_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Session>, std::less<>> sessions_;
  std::uint64_t child_counter_ = 0;
};

}  // namespace harnessd::harness
