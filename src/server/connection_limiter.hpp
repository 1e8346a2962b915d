// Bounds on open network connections, in all and per client address, so
// that one peer (or a flood of them) cannot take every descriptor or hold
// unbounded memory before it has even authenticated. Loopback peers are the
// machine's own users and count only toward the global bound.
#pragma once

#include <boost/asio/ip/address.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace harnessd::server {

class ConnectionLimiter : public std::enable_shared_from_this<ConnectionLimiter> {
 public:
  /// 0 for either bound: no bound.
  ConnectionLimiter(std::size_t max_total, std::size_t max_per_address)
      : max_total_(max_total), max_per_address_(max_per_address) {}

  /// A held place for one connection from `peer`, released when the last
  /// copy is destroyed; nullptr when a bound is reached. Thread-safe.
  std::shared_ptr<void> try_acquire(const boost::asio::ip::address& peer);

  std::size_t open() const;

 private:
  void release(const boost::asio::ip::address& peer, bool counted_per_address);

  const std::size_t max_total_;
  const std::size_t max_per_address_;
  mutable std::mutex mutex_;
  std::size_t total_ = 0;
  std::map<boost::asio::ip::address, std::size_t> per_address_;
};

}  // namespace harnessd::server
