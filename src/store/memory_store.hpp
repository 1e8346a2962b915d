// A store that keeps nothing on disk (--store memory): for benchmarks and
// throwaway daemons. An evicted session starts afresh.
#pragma once

#include "store/event_store.hpp"

#include <atomic>

namespace harnessd::store {

class MemoryStore final : public EventStore {
 public:
  boost::asio::awaitable<std::unique_ptr<SessionLog>> open(SessionHeader header) override;
  std::string_view kind() const override { return "memory"; }
  std::size_t open_logs() const override { return open_logs_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::size_t> open_logs_{0};
};

}  // namespace harnessd::store
