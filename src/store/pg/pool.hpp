// The store's read connections (the group-commit writer and the listener
// have their own): opened on demand up to a limit, handed out for one use
// each and taken back after it; a broken one is dropped.
#pragma once

#include "store/pg/connection.hpp"
#include "util/wakeup.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace harnessd::store::pg {

class Pool : public std::enable_shared_from_this<Pool> {
 public:
  /// Holds at most `max` connections, opened like Connection::open(executor,
  /// conninfo, idle_in_transaction). `report_health` is told why a
  /// connection could not be opened.
  Pool(boost::asio::any_io_executor executor, std::string conninfo, std::chrono::milliseconds idle_in_transaction,
       std::size_t max, std::function<void(std::string)> report_health);

  // A connection for one use; back to the pool when done (a broken one is dropped).
  struct Pooled {
    std::shared_ptr<Pool> pool;
    std::unique_ptr<Connection> conn;
    Pooled(std::shared_ptr<Pool> p, std::unique_ptr<Connection> c) : pool(std::move(p)), conn(std::move(c)) {}
    Pooled(Pooled&&) = default;
    ~Pooled() {
      if (pool) pool->give_back(std::move(conn));
    }
    Connection* operator->() const { return conn.get(); }
  };

  /// An idle connection, or a new one while fewer than max() are out, else
  /// waits for one to come back. Throws like Connection::open.
  boost::asio::awaitable<Pooled> acquire();

  std::size_t max() const noexcept { return max_; }
  struct Usage {
    std::size_t idle = 0;
    std::size_t out = 0;  ///< connections (or connection attempts) handed out
  };
  Usage usage() const;

  /// Forgets the waiters: their wake-ups belong to an io_context that ends.
  void stop();

 private:
  void give_back(std::unique_ptr<Connection> conn);

  boost::asio::any_io_executor executor_;
  std::string conninfo_;
  std::chrono::milliseconds idle_in_transaction_;
  std::size_t max_;
  std::function<void(std::string)> report_health_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::size_t out_ = 0;  ///< connections (or connection attempts) handed out
  std::deque<std::shared_ptr<util::Wakeup>> waiters_;
};

}  // namespace harnessd::store::pg
