#include "store/pg/lease_rounds.hpp"

#include "store/pg/text.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace harnessd::store::pg {
namespace asio = boost::asio;

namespace {

constexpr std::string_view commit_async_sql = "SELECT set_config('synchronous_commit', 'off', true)";
constexpr std::string_view take_lease_sql = R"sql(
UPDATE harnessd_sessions
SET lease_owner = $2, lease_until = now() + $3::bigint * interval '1 millisecond', lease_epoch = lease_epoch + 1
WHERE id = $1 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_until < now())
RETURNING lease_epoch, last_seq
)sql";
constexpr std::string_view release_lease_sql = R"sql(
UPDATE harnessd_sessions SET lease_owner = NULL, lease_until = NULL
WHERE id = $1 AND lease_epoch = $2::bigint AND lease_owner = $3
)sql";

// Prepared on each pooled connection a round uses (parsed and planned once).
constexpr std::string_view commit_async_statement = "harnessd_commit_async";
constexpr std::string_view take_lease_statement = "harnessd_take_lease";
constexpr std::string_view release_lease_statement = "harnessd_release_lease";

// A round holds at most this many requests; the rest wait for the next.
constexpr std::size_t round_max = 1024;

}  // namespace

LeaseRounds::LeaseRounds(asio::any_io_executor executor, std::shared_ptr<Pool> pool, std::string node_id,
                         std::chrono::milliseconds ttl, const std::atomic<bool>& stopping)
    : executor_(std::move(executor)),
      pool_(std::move(pool)),
      node_id_(std::move(node_id)),
      ttl_(ttl),
      stopping_(stopping),
      strand_(asio::make_strand(executor_)),
      inbox_(*strand_) {}

void LeaseRounds::start() { asio::co_spawn(*strand_, run(), asio::detached); }

void LeaseRounds::begin_stop() { inbox_.wake(); }

void LeaseRounds::stop() {
  inbox_.clear();
  strand_.reset();
}

asio::awaitable<std::optional<LeaseRounds::Taken>> LeaseRounds::take(std::string id) {
  auto request = std::make_shared<Request>();
  request->id = std::move(id);
  co_await ask(request);
  co_return request->taken;
}

asio::awaitable<void> LeaseRounds::release(std::string id, std::int64_t epoch) {
  auto request = std::make_shared<Request>();
  request->take = false;
  request->id = std::move(id);
  request->epoch = epoch;
  co_await ask(request);
}

asio::awaitable<void> LeaseRounds::ask(const std::shared_ptr<Request>& request) {
  request->wake = util::Wakeup::create(co_await asio::this_coro::executor);
  std::shared_ptr<Request> queued = request;
  if (!inbox_.put(queued)) throw std::system_error(errc::unavailable, "the store is stopping");
  while (!request->done.load(std::memory_order_acquire)) co_await request->wake->wait();
  if (!request->error.empty()) throw std::system_error(errc::unavailable, request->error);
}

void LeaseRounds::answer(Request& request) {
  // Keep the wake-up: the waiter may drop the request once `done` is seen.
  const std::shared_ptr<util::Wakeup> wake = request.wake;
  request.done.store(true, std::memory_order_release);
  wake->notify();
}

asio::awaitable<void> LeaseRounds::run() {
  const std::string ttl = num(ttl_.count());
  for (;;) {
    std::size_t taken = 0;
    std::vector<std::shared_ptr<Request>> round = inbox_.take([&](const auto&) { return ++taken <= round_max; });
    // Rows are locked in id order, so that two nodes' rounds over the same
    // sessions never deadlock (a session's own requests keep their order).
    std::stable_sort(round.begin(), round.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
    if (round.empty()) {
      if (!co_await inbox_.wait(stopping_)) co_return;
      continue;
    }
    std::vector<Statement> statements;
    statements.reserve(round.size() + 1);
    statements.push_back(Statement{commit_async_statement, {}, true});
    for (const auto& r : round) {
      if (r->take) {
        statements.push_back(Statement{take_lease_statement, {r->id, node_id_, ttl}, true});
      } else {
        statements.push_back(Statement{release_lease_statement, {r->id, num(r->epoch), node_id_}, true});
      }
    }
    std::string failed;
    try {
      auto conn = co_await pool_->acquire();
      static constexpr std::pair<std::string_view, std::string_view> prepared[] = {
          {commit_async_statement, commit_async_sql},
          {take_lease_statement, take_lease_sql},
          {release_lease_statement, release_lease_sql}};
      for (const auto& [name, sql] : prepared) {
        std::string name_text(name);
        std::string sql_text(sql);
        co_await conn->prepare_once(std::move(name_text), std::move(sql_text));
      }
      const std::vector<Result> results = co_await conn->run(statements);
      for (std::size_t i = 0; i < round.size(); ++i) {
        const Result& result = results.at(i + 1);
        if (!result.ok) {
          // The transaction is gone, and with it every request of the round:
          // these statements fail only when the database does.
          failed = "taking or giving back session leases: " + result.error;
          break;
        }
        Request& r = *round[i];
        if (r.take && !result.rows.empty()) r.taken = Taken{to_int(result.rows[0][0]), to_int(result.rows[0][1])};
      }
    } catch (const std::system_error& e) {
      failed = reason_of(e);
    } catch (const std::exception& e) {
      // Whatever else fails a round fails its requests: the coroutine must
      // live on, or every later caller would wait forever.
      failed = std::string("taking or giving back session leases: ") + e.what();
    }
    rounds_.fetch_add(1, std::memory_order_relaxed);
    for (const auto& r : round) {
      if (!failed.empty()) {
        r->taken.reset();
        r->error = failed;
      }
      answer(*r);
    }
  }
}

}  // namespace harnessd::store::pg
