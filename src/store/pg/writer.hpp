// The group-commit writer: one coroutine on one connection of its own
// writes the appended events of every session, many sessions' writes per
// transaction (how a group's writes end: commit_group.hpp). Logs enqueue
// their writes and wait on each one's WriteState.
#pragma once

#include "store/catalog.hpp"
#include "store/pg/connection.hpp"
#include "store/pg/inbox.hpp"
#include "util/wakeup.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace harnessd::store::pg {

/// Where a commit of appended events stands.
struct WriteState {
  enum Status { pending, committed, fenced, failed };
  std::atomic<Status> status{pending};
  std::string error;  ///< set before status, with `failed`
  std::shared_ptr<util::Wakeup> wake;
};

struct PendingWrite {
  std::string session_id;
  std::int64_t epoch = 0;
  std::int64_t first_seq = 0;
  std::size_t count = 0;
  std::string events;  ///< one per line
  LogPosition at;
  std::shared_ptr<WriteState> state;
};

class Writer {
 public:
  /// Writes as `node_id`, each write extending its session's lease by
  /// `lease_ttl`; connects like Connection::open(executor, conninfo,
  /// lease_ttl). Ends once `stopping` is set and nothing is queued.
  /// `report_health` is told how the database answered each group.
  Writer(boost::asio::any_io_executor executor, std::string conninfo, std::chrono::milliseconds lease_ttl,
         std::string node_id, const std::atomic<bool>& stopping, std::function<void(std::string)> report_health);

  /// Starts the writer coroutine (on a strand of its own). It runs on a raw
  /// `this`: the owner keeps the writer alive until it ends.
  void start();
  /// Thread-safe. `write` commits with the next group; its state says how.
  void enqueue(PendingWrite write);
  /// Wakes the writer to see `stopping`.
  void begin_stop();
  /// Drops what belongs to the io_context: the strand, the inbox's wake-up
  /// and the writes still queued.
  void stop();

  struct Counters {
    std::atomic<std::uint64_t> commits{0}, commit_events{0}, commit_failures{0}, commit_us_total{0};
    std::atomic<std::uint64_t> commit_us_max{0};
    std::atomic<std::uint64_t> writes_fenced{0};
  };
  const Counters& counters() const noexcept { return counters_; }

 private:
  std::vector<PendingWrite> take_group();
  static void settle(PendingWrite& write, WriteState::Status status, std::string error = {});
  boost::asio::awaitable<void> run();

  boost::asio::any_io_executor executor_;
  std::string conninfo_;
  std::chrono::milliseconds lease_ttl_;
  std::string node_id_;
  const std::atomic<bool>& stopping_;
  std::function<void(std::string)> report_health_;
  // Both emptied by stop(): the store outlives the io_context they belong to.
  std::optional<boost::asio::strand<boost::asio::any_io_executor>> strand_;
  Inbox<PendingWrite> inbox_;
  Counters counters_;
};

}  // namespace harnessd::store::pg
