// Sessions in PostgreSQL, so several harnessd nodes serve one fleet of
// sessions (docs/protocol.md §7). One row per event, byte for byte as
// notified; a sessions table with the header fields, lastSeq and the lease.
// A prompt takes the session's lease (owner node, expiry, epoch) atomically;
// every write checks the epoch in the database, so a node that lost the
// lease can write nothing after the new owner started. Events of many
// sessions commit together, and nobody sees an event before its commit.
#pragma once

#include "store/event_store.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace harnessd::store {

struct PostgresOptions {
  std::string url;      ///< libpq URI or key=value string; empty: the PG* environment
  std::string node_id;  ///< this node in lease rows and in -32001's data.node
  std::chrono::milliseconds lease_ttl{10000};
  std::size_t pool_size = 4;  ///< connections: the writer, the cancel listener, the rest for reads
};

class PostgresStore final : public EventStore, public Coordination {
 public:
  PostgresStore(boost::asio::any_io_executor executor, PostgresOptions options);
  ~PostgresStore() override;

  /// Creates or upgrades the schema (blocking; at start, before serving).
  /// Safe when several nodes start at once. Throws std::runtime_error.
  void migrate_now();

  boost::asio::awaitable<std::unique_ptr<SessionLog>> open(SessionHeader header, OpenMode mode = OpenMode::create) override;
  boost::asio::awaitable<ListPage> list(std::optional<std::string> cursor, std::size_t limit) override;
  boost::asio::awaitable<std::optional<EventPage>> read_events(std::string id, std::int64_t after_seq,
                                                               std::size_t limit, std::size_t max_bytes) override;
  std::string_view kind() const override { return "postgres"; }
  std::size_t open_logs() const override;
  Coordination* coordination() override { return this; }
  /// Starts the group-commit writer and the listener of forwarded cancels and decisions.
  void start() override;
  boost::asio::awaitable<bool> forward_cancel(std::string session_id) override;
  void on_forwarded_cancel(std::function<void(const std::string&)> handler) override;
  boost::asio::awaitable<bool> forward_decision(std::string session_id, std::string message) override;
  void on_forwarded_decision(std::function<void(const std::string&)> handler) override;
  std::string database_status() const override;
  std::string metrics() const override;
  void begin_stop() override;
  void stop() override;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace harnessd::store
