// A store that keeps nothing on disk (--store memory): for benchmarks and
// throwaway daemons. Sessions live as long as the process.
#pragma once

#include "harnessd/store/event_store.hpp"

namespace harnessd::store {

class MemoryStore final : public EventStore {
 public:
  std::unique_ptr<SessionLog> open(const SessionHeader& header) override;
  std::string_view kind() const override { return "memory"; }
};

}  // namespace harnessd::store
