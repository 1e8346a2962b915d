#include "server/connection_limiter.hpp"

namespace harnessd::server {

std::shared_ptr<void> ConnectionLimiter::try_acquire(const boost::asio::ip::address& peer) {
  // An IPv4 client on a dual-stack socket counts as its IPv4 address.
  boost::asio::ip::address address = peer;
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, address.to_v6());
  }
  const bool per_address = max_per_address_ > 0 && !address.is_loopback();
  {
    std::lock_guard lock(mutex_);
    if (max_total_ > 0 && total_ >= max_total_) return nullptr;
    if (per_address) {
      std::size_t& count = per_address_[address];
      if (count >= max_per_address_) return nullptr;
      ++count;
    }
    ++total_;
  }
  // The slot holds the limiter, so a connection that outlives the server
  // object still releases into live memory.
  struct Slot {
    std::shared_ptr<ConnectionLimiter> limiter;
    boost::asio::ip::address address;
    bool per_address;
    ~Slot() { limiter->release(address, per_address); }
  };
  return std::make_shared<Slot>(shared_from_this(), address, per_address);
}

void ConnectionLimiter::release(const boost::asio::ip::address& peer, bool counted_per_address) {
  std::lock_guard lock(mutex_);
  --total_;
  if (!counted_per_address) return;
  const auto it = per_address_.find(peer);
  if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
}

std::size_t ConnectionLimiter::open() const {
  std::lock_guard lock(mutex_);
  return total_;
}

}  // namespace harnessd::server
