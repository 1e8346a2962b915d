#include "harnessd/store/memory_store.hpp"

namespace harnessd::store {
namespace {

// The session's in-memory state is the only copy; appends are not retained
// so a long-running benchmark does not grow without bound.
class MemoryLog final : public SessionLog {
 public:
  explicit MemoryLog(boost::json::object header) : header_(std::move(header)) {}
  const boost::json::object& header() const override { return header_; }
  std::vector<boost::json::object> take_loaded_events() override { return {}; }
  void append(std::string_view) override {}
  void sync() override {}

 private:
  boost::json::object header_;
};

}  // namespace

std::unique_ptr<SessionLog> MemoryStore::open(const SessionHeader& header) {
  return std::make_unique<MemoryLog>(header.to_json());
}

}  // namespace harnessd::store
