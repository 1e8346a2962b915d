#include "store/memory_store.hpp"

namespace harnessd::store {
namespace {

// The session's in-memory state is the only copy; appends are not retained
// so a long-running benchmark does not grow without bound.
class MemoryLog final : public SessionLog {
 public:
  MemoryLog(boost::json::object header, std::atomic<std::size_t>& open_logs)
      : header_(std::move(header)), open_logs_(open_logs) {
    open_logs_.fetch_add(1, std::memory_order_relaxed);
  }
  ~MemoryLog() override { open_logs_.fetch_sub(1, std::memory_order_relaxed); }
  const boost::json::object& header() const override { return header_; }
  std::vector<boost::json::object> take_loaded_events() override { return {}; }
  void append(std::span<const std::string_view>) override {}
  boost::asio::awaitable<void> end_turn() override { co_return; }

 private:
  boost::json::object header_;
  std::atomic<std::size_t>& open_logs_;
};

}  // namespace

boost::asio::awaitable<std::unique_ptr<SessionLog>> MemoryStore::open(SessionHeader header) {
  co_return std::make_unique<MemoryLog>(header.to_json(), open_logs_);
}

}  // namespace harnessd::store
