// The event stores --store can name, as a table: each kind's name, its
// --help line, and how it opens. Adding a store is one row here plus its
// EventStore implementation under src/store/.
#pragma once

#include "store/event_store.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace harnessd {

struct DaemonConfig;

/// What a store needs to open. `config` may be completed (postgres.node_id).
struct StoreSetup {
  DaemonConfig& config;
  std::string session_root;
  boost::asio::any_io_executor executor;
};

struct StoreKind {
  std::string_view name;
  std::string_view description;  ///< for --help
  /// Whether a session closed to keep within --max-open-logs can be opened
  /// again from the store. A memory session cannot: closing it ends it.
  bool sessions_reopen;
  /// --max-running-turns when 0 (before the descriptor limit's cap).
  std::size_t default_max_running_turns;
  /// Opens it, ready to serve. Throws std::runtime_error on a failure the
  /// daemon cannot start with.
  std::unique_ptr<store::EventStore> (*open)(StoreSetup& setup);
};

std::span<const StoreKind> store_kinds();
/// The row named `name`, or null.
const StoreKind* find_store_kind(std::string_view name);

}  // namespace harnessd
