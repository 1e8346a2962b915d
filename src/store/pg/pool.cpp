#include "store/pg/pool.hpp"

#include "store/pg/text.hpp"

#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <system_error>

namespace harnessd::store::pg {
namespace asio = boost::asio;

Pool::Pool(asio::any_io_executor executor, std::string conninfo, std::chrono::milliseconds idle_in_transaction,
           std::size_t max, std::function<void(std::string)> report_health)
    : executor_(std::move(executor)),
      conninfo_(std::move(conninfo)),
      idle_in_transaction_(idle_in_transaction),
      max_(max),
      report_health_(std::move(report_health)) {}

asio::awaitable<Pool::Pooled> Pool::acquire() {
  const auto waiter_executor = co_await asio::this_coro::executor;
  std::shared_ptr<util::Wakeup> wake;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        std::unique_ptr<Connection> conn = std::move(idle_.back());
        idle_.pop_back();
        co_return Pooled(shared_from_this(), std::move(conn));
      }
      if (out_ < max_) {
        ++out_;
        break;
      }
      if (!wake) wake = util::Wakeup::create(waiter_executor);
      if (std::find(waiters_.begin(), waiters_.end(), wake) == waiters_.end()) {
        waiters_.push_back(wake);
      }
    }
    co_await wake->wait();
  }
  std::unique_ptr<Connection> conn;
  try {
    conn = co_await Connection::open(executor_, conninfo_, idle_in_transaction_);
  } catch (const std::system_error& e) {
    give_back(nullptr);
    report_health_(reason_of(e));
    throw;
  }
  co_return Pooled(shared_from_this(), std::move(conn));
}

void Pool::give_back(std::unique_ptr<Connection> conn) {
  std::deque<std::shared_ptr<util::Wakeup>> waiters;
  {
    std::lock_guard lock(mutex_);
    if (conn && !conn->broken()) {
      idle_.push_back(std::move(conn));
    } else {
      --out_;
    }
    waiters.swap(waiters_);
  }
  // Every waiter looks again: one takes the connection, the others queue
  // up anew. Waking one alone could wake one that no longer waits.
  for (const auto& w : waiters) w->notify();
}

Pool::Usage Pool::usage() const {
  std::lock_guard lock(mutex_);
  return Usage{idle_.size(), out_};
}

void Pool::stop() {
  std::lock_guard lock(mutex_);
  waiters_.clear();
}

}  // namespace harnessd::store::pg
