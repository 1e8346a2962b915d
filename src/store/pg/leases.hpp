// Lease renewal: while a turn runs, the session's lease is extended every
// third of its TTL on a read connection, so that no other node takes the
// session over; a renewal that finds the lease taken over stops (the
// session's writes are then fenced).
#pragma once

#include "store/pg/pool.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace harnessd::store::pg {

/// What renewals share: how they renew, and what they found.
class Leases {
 public:
  /// Renews as `node_id` for `ttl`, on connections of `pool`; renewals end
  /// at their next period once `stopping` is set.
  Leases(std::shared_ptr<Pool> pool, std::string node_id, std::chrono::milliseconds ttl,
         const std::atomic<bool>& stopping);

  std::uint64_t lost() const noexcept { return lost_.load(); }

 private:
  friend class Renewal;
  std::shared_ptr<Pool> pool_;
  std::string node_id_;
  std::chrono::milliseconds ttl_;
  const std::atomic<bool>& stopping_;
  std::atomic<std::uint64_t> lost_{0};  ///< leases found taken over while renewing
};

/// Renews a lease every third of its TTL while a turn runs.
class Renewal : public std::enable_shared_from_this<Renewal> {
 public:
  /// Renews session `id`'s lease `epoch` until stop(), or until it finds
  /// the lease lost. The renewal keeps `leases` alive until it ends.
  static std::shared_ptr<Renewal> start(const boost::asio::any_io_executor& executor, std::shared_ptr<Leases> leases,
                                        std::string id, std::int64_t epoch);
  /// Thread-safe.
  void stop();

 private:
  explicit Renewal(const boost::asio::any_io_executor& executor);
  static boost::asio::awaitable<void> renew(std::shared_ptr<Leases> leases, std::shared_ptr<Renewal> renewal,
                                            std::string id, std::int64_t epoch);

  boost::asio::strand<boost::asio::any_io_executor> strand_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
};

}  // namespace harnessd::store::pg
