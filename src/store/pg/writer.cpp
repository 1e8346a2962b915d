#include "store/pg/writer.hpp"

#include "store/pg/commit_group.hpp"
#include "store/pg/text.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <system_error>

namespace harnessd::store::pg {
namespace asio = boost::asio;

namespace {

// A write of one session's events: only under the lease it was made with
// (the fence) and right after the session's last seq (never past a gap a
// failed write left), in the same statement that moves the session's
// position. The events are one row, a line each (serialized JSON has no
// raw newline).
constexpr std::string_view write_sql = R"sql(
WITH lease AS (
  UPDATE harnessd_sessions
  SET last_seq = $4::bigint, turns = $5::bigint, updated_at = $6::bigint,
      lease_until = now() + $9::bigint * interval '1 millisecond'
  WHERE id = $1 AND lease_epoch = $2::bigint AND lease_owner = $3 AND last_seq = $7::bigint - 1
  RETURNING id)
INSERT INTO harnessd_event_batches (session_id, first_seq, last_seq, events)
SELECT lease.id, $7::bigint, $4::bigint, $8 FROM lease
)sql";

constexpr std::string_view write_statement = "harnessd_write";

// A commit group holds at most this much; the rest waits for the next one.
constexpr std::size_t group_max_events = 4096;
constexpr std::size_t group_max_bytes = 8 * 1024 * 1024;

}  // namespace

Writer::Writer(asio::any_io_executor executor, std::string conninfo, std::chrono::milliseconds lease_ttl,
               std::string node_id, const std::atomic<bool>& stopping, std::function<void(std::string)> report_health)
    : executor_(std::move(executor)),
      conninfo_(std::move(conninfo)),
      lease_ttl_(lease_ttl),
      node_id_(std::move(node_id)),
      stopping_(stopping),
      report_health_(std::move(report_health)),
      strand_(asio::make_strand(executor_)),
      inbox_(*strand_) {}

void Writer::start() { asio::co_spawn(*strand_, run(), asio::detached); }

void Writer::enqueue(PendingWrite write) {
  if (!inbox_.put(write)) settle(write, WriteState::failed, "the store is stopping");
}

void Writer::begin_stop() { inbox_.wake(); }

void Writer::stop() {
  inbox_.clear();
  strand_.reset();
}

std::vector<PendingWrite> Writer::take_group() {
  std::size_t events = 0;
  std::size_t bytes = 0;
  return inbox_.take([&](const PendingWrite& write) {
    events += write.count;
    bytes += write.events.size();
    return events <= group_max_events && bytes <= group_max_bytes;
  });
}

void Writer::settle(PendingWrite& write, WriteState::Status status, std::string error) {
  write.state->error = std::move(error);
  write.state->status.store(status, std::memory_order_release);
  write.state->wake->notify();
}

// One writer, many sessions' events per transaction.
asio::awaitable<void> Writer::run() {
  std::unique_ptr<Connection> conn;
  asio::steady_timer backoff(*strand_);
  const std::string ttl = num(lease_ttl_.count());
  for (;;) {
    std::vector<PendingWrite> group = take_group();
    if (group.empty()) {
      if (!co_await inbox_.wait(stopping_)) co_return;
      continue;
    }
    std::vector<Statement> statements;
    std::vector<GroupWrite> writes;
    statements.reserve(group.size());
    writes.reserve(group.size());
    for (PendingWrite& w : group) {
      writes.push_back(GroupWrite{w.session_id, w.epoch, 1});  // one row: the batch
      statements.push_back(Statement{write_statement,
                                     {w.session_id, num(w.epoch), node_id_, num(w.at.last_seq), num(w.at.turns),
                                      num(w.at.time_ms), num(w.first_seq), std::move(w.events), ttl},
                                     true});
    }
    const auto started = std::chrono::steady_clock::now();
    std::optional<std::vector<Settled>> settled;
    bool retried = false;
    std::string broken;
    try {
      if (!conn || conn->broken()) {
        conn = co_await Connection::open(executor_, conninfo_, lease_ttl_);
        // Parsed and planned once per connection, not once per write: with
        // the default plan cache mode the server planned the write afresh
        // each time (its custom plan looked cheaper than the generic one).
        const Statement generic{"SET plan_cache_mode = force_generic_plan", {}};
        checked(co_await conn->run(generic), "setting the writer's plan cache mode");
        std::string name(write_statement);
        std::string sql(write_sql);
        co_await conn->prepare(std::move(name), std::move(sql));
      }
      const std::vector<Result> together = co_await conn->run(statements);
      settled = settle_together(writes, together);
      if (!settled) {
        // One write failed, so the transaction of all of them did: each
        // runs again in a transaction of its own, so that only the one
        // that fails alone fails its turn.
        retried = true;
        const auto failed = std::find_if(together.begin(), together.end(), [](const Result& r) { return !r.ok; });
        spdlog::warn("postgres: a commit group of {} writes failed ({}); each runs again alone", group.size(),
                     failed != together.end() ? failed->error : std::string("no result"));
        const std::vector<Result> alone = co_await conn->run_each(statements);
        settled = settle_alone(writes, alone);
      }
    } catch (const std::system_error& e) {
      broken = reason_of(e);
    } catch (const std::exception& e) {
      // The writer must live on whatever fails, or every later write would
      // wait forever: the group fails, the next one gets a new connection.
      broken = std::string("writing to PostgreSQL: ") + e.what();
    }
    if (retried) counters_.commit_failures.fetch_add(1);
    if (!broken.empty()) {
      conn.reset();
      counters_.commit_failures.fetch_add(1);
      report_health_(broken);
      for (PendingWrite& w : group) settle(w, WriteState::failed, broken);
      // Do not spin on a database that is down: the next group waits a little.
      backoff.expires_after(std::chrono::milliseconds(200));
      co_await backoff.async_wait(asio::use_awaitable);
      continue;
    }
    const auto us = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count());
    counters_.commits.fetch_add(1);
    counters_.commit_us_total.fetch_add(us);
    for (std::uint64_t seen = counters_.commit_us_max.load();
         us > seen && !counters_.commit_us_max.compare_exchange_weak(seen, us);) {
    }
    report_health_("ok");
    for (std::size_t i = 0; i < group.size(); ++i) {
      Settled& s = (*settled)[i];
      switch (s.outcome) {
        case WriteOutcome::committed:
          counters_.commit_events.fetch_add(group[i].count);
          settle(group[i], WriteState::committed);
          break;
        case WriteOutcome::fenced:
          counters_.writes_fenced.fetch_add(1);
          settle(group[i], WriteState::fenced);
          break;
        case WriteOutcome::failed:
          counters_.commit_failures.fetch_add(1);
          spdlog::warn("session {}: write of seq {}..{} not committed: {}", group[i].session_id, group[i].first_seq,
                       group[i].at.last_seq, s.error);
          settle(group[i], WriteState::failed, std::move(s.error));
          break;
      }
    }
  }
}

}  // namespace harnessd::store::pg
