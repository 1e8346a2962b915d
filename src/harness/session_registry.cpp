#include "harnessd/harness/session_registry.hpp"

#include <boost/asio/strand.hpp>

#include <random>

namespace harnessd::harness {

SessionRegistry::SessionRegistry(boost::asio::any_io_executor executor, store::EventStore& store,
                                 HarnessOptions options)
    : executor_(std::move(executor)), store_(store), options_(options) {}

std::shared_ptr<Session> SessionRegistry::make_session(std::string id,
                                                       std::optional<std::string> parent,
                                                       int depth) {
  return std::make_shared<Session>(boost::asio::make_strand(executor_), std::move(id), *this,
                                   std::move(parent), depth);
}

std::shared_ptr<Session> SessionRegistry::get_or_create(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  if (it != sessions_.end()) return it->second;
  auto session = make_session(std::string(id), std::nullopt, 0);
  sessions_.emplace(std::string(id), session);
  return session;
}

std::shared_ptr<Session> SessionRegistry::find(std::string_view id) const {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

std::shared_ptr<Session> SessionRegistry::create_child(const Session& parent) {
  // Random suffix: child ids stay unique across daemon restarts too.
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::lock_guard lock(mutex_);
  for (;;) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random()));
    std::string id = parent.id() + ".sub-" + std::to_string(++child_counter_) + "-" + suffix;
    if (sessions_.contains(id)) continue;
    // Same strand as the parent: the child turn runs inside the parent's turn.
    auto child = std::make_shared<Session>(parent.strand(), id, *this, parent.id(),
                                           parent.delegation_depth() + 1);
    sessions_.emplace(std::move(id), child);
    return child;
  }
}

std::size_t SessionRegistry::size() const {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

}  // namespace harnessd::harness
