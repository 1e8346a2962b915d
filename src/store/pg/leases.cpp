#include "store/pg/leases.hpp"

#include "store/pg/text.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <system_error>

namespace harnessd::store::pg {
namespace asio = boost::asio;

namespace {

constexpr std::string_view renew_lease_sql = R"sql(
UPDATE harnessd_sessions SET lease_until = now() + $4::bigint * interval '1 millisecond'
WHERE id = $1 AND lease_epoch = $2::bigint AND lease_owner = $3
)sql";

}  // namespace

Leases::Leases(std::shared_ptr<Pool> pool, std::string node_id, std::chrono::milliseconds ttl,
               const std::atomic<bool>& stopping)
    : pool_(std::move(pool)), node_id_(std::move(node_id)), ttl_(ttl), stopping_(stopping) {}

Renewal::Renewal(const asio::any_io_executor& executor) : strand_(asio::make_strand(executor)), timer_(strand_) {}

std::shared_ptr<Renewal> Renewal::start(const asio::any_io_executor& executor, std::shared_ptr<Leases> leases,
                                        std::string id, std::int64_t epoch) {
  std::shared_ptr<Renewal> renewal(new Renewal(executor));
  asio::co_spawn(renewal->strand_, renew(std::move(leases), renewal, std::move(id), epoch), asio::detached);
  return renewal;
}

void Renewal::stop() {
  asio::post(strand_, [self = shared_from_this()] {
    self->stopped_ = true;
    self->timer_.cancel();
  });
}

asio::awaitable<void> Renewal::renew(std::shared_ptr<Leases> leases, std::shared_ptr<Renewal> renewal, std::string id,
                                     std::int64_t epoch) {
  const auto period = std::max(leases->ttl_ / 3, std::chrono::milliseconds(10));
  const std::string ttl = num(leases->ttl_.count());
  for (;;) {
    renewal->timer_.expires_after(period);
    boost::system::error_code ec;
    co_await renewal->timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    // A store that stops ends its renewals too: nothing may keep the event
    // loop alive after the last connection closed.
    if (renewal->stopped_ || leases->stopping_.load()) co_return;
    try {
      auto conn = co_await leases->pool_->acquire();
      const Statement statement{renew_lease_sql, {id, num(epoch), leases->node_id_, ttl}};
      const Result r = co_await conn->run(statement);
      if (r.ok && r.affected == 0) {
        leases->lost_.fetch_add(1);
        spdlog::warn("session {}: lease lost to another node; its writes will be refused", id);
        co_return;
      }
    } catch (const std::system_error& e) {
      spdlog::warn("session {}: lease not renewed: {}", id, e.what());
    }
  }
}

}  // namespace harnessd::store::pg
