// A store that keeps nothing on disk (--store memory): for benchmarks and
// throwaway daemons. It keeps no events either, only the session list: an
// evicted session starts afresh, and session/events pages are empty.
#pragma once

#include "store/event_store.hpp"

#include <atomic>

namespace harnessd::store {

class MemoryStore final : public EventStore {
 public:
  boost::asio::awaitable<std::unique_ptr<SessionLog>> open(SessionHeader header, OpenMode mode = OpenMode::create) override;
  boost::asio::awaitable<ListPage> list(std::optional<std::string> cursor, std::size_t limit) override;
  boost::asio::awaitable<std::optional<EventPage>> read_events(std::string id, std::int64_t after_seq,
                                                               std::size_t limit, std::size_t max_bytes) override;
  boost::asio::awaitable<bool> remove(std::string id) override;
  std::string_view kind() const override { return "memory"; }
  std::size_t open_logs() const override { return open_logs_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::size_t> open_logs_{0};
  Catalog catalog_;
};

}  // namespace harnessd::store
