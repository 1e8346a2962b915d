// Lease takes and releases in rounds: every turn takes its session's lease
// before it starts and gives it back when it settles. Alone, each was a
// transaction of its own on a read connection (two commits a turn, and two
// pool round trips). Here one coroutine sends everything asked since its last
// round as one pipeline and one transaction, committed without waiting for
// the WAL flush, and answers each caller from that transaction's results.
//
// Without the flush: a turn's first write waits for its own flush, which
// covers the lease before it. A lease the database lost in a crash fences the
// writes made under it (they name owner and epoch); a lost release only lets
// the lease expire.
#pragma once

#include "store/pg/inbox.hpp"
#include "store/pg/pool.hpp"
#include "util/wakeup.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace harnessd::store::pg {

class LeaseRounds {
 public:
  /// Takes leases as `node_id` for `ttl`, on connections of `pool`. Ends
  /// once `stopping` is set and nothing is queued.
  LeaseRounds(boost::asio::any_io_executor executor, std::shared_ptr<Pool> pool, std::string node_id,
              std::chrono::milliseconds ttl, const std::atomic<bool>& stopping);

  /// Starts the round coroutine (on a strand of its own). It runs on a raw
  /// `this`: the owner keeps it alive until it ends.
  void start();
  void begin_stop();
  /// Drops what belongs to the io_context (see Writer::stop).
  void stop();

  struct Taken {
    std::int64_t epoch = 0;     ///< the lease's new epoch: writes name it
    std::int64_t last_seq = 0;  ///< the session's last seq in the database
  };
  /// Takes session `id`'s lease if it is free, expired or this node's;
  /// nullopt when another live node holds it or the session is not there.
  /// Throws std::system_error(errc::unavailable) when the database failed.
  boost::asio::awaitable<std::optional<Taken>> take(std::string id);
  /// Gives the lease `epoch` of session `id` back (a no-op when the epoch
  /// moved on). Throws like take().
  boost::asio::awaitable<void> release(std::string id, std::int64_t epoch);

  std::uint64_t rounds() const noexcept { return rounds_.load(); }

 private:
  struct Request {
    bool take = true;
    std::string id;
    std::int64_t epoch = 0;  ///< of a release
    // Answered by the round: the caller waits on `wake` for `done`.
    std::atomic<bool> done{false};
    std::optional<Taken> taken;
    std::string error;  ///< the round failed
    std::shared_ptr<util::Wakeup> wake;
  };
  boost::asio::awaitable<void> ask(const std::shared_ptr<Request>& request);
  boost::asio::awaitable<void> run();
  static void answer(Request& request);

  boost::asio::any_io_executor executor_;
  std::shared_ptr<Pool> pool_;
  std::string node_id_;
  std::chrono::milliseconds ttl_;
  const std::atomic<bool>& stopping_;
  std::optional<boost::asio::strand<boost::asio::any_io_executor>> strand_;
  Inbox<std::shared_ptr<Request>> inbox_;
  std::atomic<std::uint64_t> rounds_{0};
};

}  // namespace harnessd::store::pg
