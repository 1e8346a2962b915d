#include "store_kinds.hpp"

#include "daemon_config.hpp"
#include "store/jsonl_store.hpp"
#include "store/memory_store.hpp"
#include "store/postgres_store.hpp"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <array>
#include <cstring>

namespace harnessd {

namespace {

/// A node's default name in session leases: HOSTNAME-PID, distinct per process.
std::string default_node_id() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "harnessd");
  return std::string(host) + "-" + std::to_string(::getpid());
}

std::unique_ptr<store::EventStore> open_jsonl(StoreSetup& setup) {
  return std::make_unique<store::JsonlStore>(setup.session_root, setup.config.jsonl);
}

std::unique_ptr<store::EventStore> open_memory(StoreSetup&) { return std::make_unique<store::MemoryStore>(); }

std::unique_ptr<store::EventStore> open_postgres(StoreSetup& setup) {
  store::PostgresOptions& options = setup.config.postgres;
  if (options.node_id.empty()) options.node_id = default_node_id();
  auto store = std::make_unique<store::PostgresStore>(setup.executor, options);
  store->migrate_now();
  spdlog::info("postgres store: node {}, lease ttl {} ms, pool {}", options.node_id, options.lease_ttl.count(),
               options.pool_size);
  return store;
}

constexpr std::array<StoreKind, 3> kinds{{
    // Running turns share the threads fairly (BulkLane): more of them do not
    // delay a light session. A postgres turn holds database work in flight
    // (its lease, its commits): there, 1,000 turns at once served fewer
    // prompts than 256 did (bench/ANALYSIS.md), so it keeps 256.
    {"jsonl", "durable files under --session-root", true, 4096, open_jsonl},
    {"memory", "keeps no events on disk; a session ends with --session-idle-ms or the daemon", false, 4096,
     open_memory},
    {"postgres", "several nodes share one set of sessions; see --postgres-url", false, 256, open_postgres},
}};

}  // namespace

std::span<const StoreKind> store_kinds() { return kinds; }

const StoreKind* find_store_kind(std::string_view name) {
  for (const StoreKind& kind : kinds) {
    if (kind.name == name) return &kind;
  }
  return nullptr;
}

}  // namespace harnessd
