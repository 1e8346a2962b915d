#include "store/memory_store.hpp"

namespace harnessd::store {
namespace {

// The session's in-memory state is the only copy; appends are not retained
// so a long-running benchmark does not grow without bound.
class MemoryLog final : public SessionLog {
 public:
  MemoryLog(boost::json::object header, Catalog& catalog, Catalog::Handle entry,
            std::atomic<std::size_t>& open_logs)
      : header_(std::move(header)), catalog_(catalog), entry_(entry), open_logs_(open_logs) {
    open_logs_.fetch_add(1, std::memory_order_relaxed);
  }
  ~MemoryLog() override { open_logs_.fetch_sub(1, std::memory_order_relaxed); }
  const boost::json::object& header() const override { return header_; }
  std::vector<boost::json::object> take_loaded_events() override { return {}; }
  void append(std::span<const std::string_view>, const LogPosition& at) override { catalog_.advance(entry_, at); }
  boost::asio::awaitable<void> end_turn() override { co_return; }

 private:
  boost::json::object header_;
  Catalog& catalog_;
  Catalog::Handle entry_;
  std::atomic<std::size_t>& open_logs_;
};

}  // namespace

boost::asio::awaitable<std::unique_ptr<SessionLog>> MemoryStore::open(SessionHeader header, OpenMode mode) {
  if (mode == OpenMode::existing && !catalog_.contains(header.id)) co_return nullptr;
  Catalog::Handle entry = catalog_.opened(SessionInfo{.id = header.id,
                                                      .created_at_ms = header.created_at_ms,
                                                      .updated_at_ms = header.created_at_ms,
                                                      .parent = header.parent_session});
  co_return std::make_unique<MemoryLog>(header.to_json(), catalog_, entry, open_logs_);
}

boost::asio::awaitable<ListPage> MemoryStore::list(std::optional<std::string> cursor, std::size_t limit) {
  co_return catalog_.page(cursor, limit);
}

boost::asio::awaitable<std::optional<EventPage>> MemoryStore::read_events(std::string id, std::int64_t,
                                                                          std::size_t, std::size_t) {
  std::optional<SessionInfo> info = catalog_.find(id);
  if (!info) co_return std::nullopt;
  co_return EventPage{.events = {}, .last_seq = info->last_seq, .more = false};
}

boost::asio::awaitable<bool> MemoryStore::remove(std::string id) { co_return catalog_.remove(id); }

}  // namespace harnessd::store
