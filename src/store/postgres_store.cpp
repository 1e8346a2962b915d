#include "store/postgres_store.hpp"

#include "store/errc.hpp"
#include "store/pg/commit_group.hpp"
#include "store/pg/connection.hpp"
#include "util/wakeup.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fmt/format.h>
#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>

namespace harnessd::store {
namespace asio = boost::asio;
namespace json = boost::json;
using pg::Connection;
using pg::Result;
using pg::Statement;

namespace {

constexpr int schema_version = 1;
// One lock id for every node's migration (an arbitrary constant).
constexpr std::string_view migration_lock = "SELECT pg_advisory_lock(7270113)";
constexpr std::string_view migration_unlock = "SELECT pg_advisory_unlock(7270113)";

constexpr std::string_view schema_v1 = R"sql(
CREATE TABLE IF NOT EXISTS harnessd_sessions (
  id          text PRIMARY KEY,
  header      text   NOT NULL,               -- line 0 of a jsonl log, as first written
  created_at  bigint NOT NULL,               -- ms since the epoch
  cwd         text,
  parent_id   text,
  depth       integer NOT NULL DEFAULT 0,
  last_seq    bigint NOT NULL DEFAULT -1,
  turns       bigint NOT NULL DEFAULT 0,
  updated_at  bigint NOT NULL,               -- ms, time of the last event
  lease_owner text,                          -- node running a turn, or null
  lease_until timestamptz,
  lease_epoch bigint NOT NULL DEFAULT 0      -- +1 per lease taken: fences old owners
);
CREATE INDEX IF NOT EXISTS harnessd_sessions_by_update ON harnessd_sessions (updated_at DESC, id COLLATE "C");
CREATE TABLE IF NOT EXISTS harnessd_events (
  session_id text   NOT NULL REFERENCES harnessd_sessions (id),
  seq        bigint NOT NULL,
  event      text   NOT NULL,                -- byte for byte the notified params.event
  PRIMARY KEY (session_id, seq)
);
)sql";

// A write of one session's events: only under the lease it was made with
// (the fence) and right after the session's last seq (never past a gap a
// failed write left), in the same statement that moves the session's
// position. Events travel as one text, a line each (serialized JSON has no
// raw newline).
constexpr std::string_view write_sql = R"sql(
WITH lease AS (
  UPDATE harnessd_sessions
  SET last_seq = $4::bigint, turns = $5::bigint, updated_at = $6::bigint,
      lease_until = now() + $9::bigint * interval '1 millisecond'
  WHERE id = $1 AND lease_epoch = $2::bigint AND lease_owner = $3 AND last_seq = $7::bigint - 1
  RETURNING id)
INSERT INTO harnessd_events (session_id, seq, event)
SELECT lease.id, $7::bigint + e.n - 1, e.event
FROM lease, string_to_table($8, E'\n') WITH ORDINALITY AS e(event, n)
)sql";

constexpr std::string_view write_statement = "harnessd_write";

// A page of session/events, capped in SQL: at most $3 events, and no more
// than $4 bytes of them once the page has one (so a single larger event is
// still readable), so no more than about a page ever leaves the database.
// `more`: an event follows the row (read on its last row). octet_length
// reads a stored value's size without decompressing it.
constexpr std::string_view read_page_sql = R"sql(
SELECT seq, event, more FROM (
  SELECT seq, event, row_number() OVER w AS n, sum(octet_length(event)) OVER w AS bytes,
         lead(seq) OVER w IS NOT NULL AS more
  FROM harnessd_events WHERE session_id = $1 AND seq > $2::bigint
  WINDOW w AS (ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
  ORDER BY seq LIMIT $3::bigint) page
WHERE n = 1 OR bytes <= $4::bigint
ORDER BY seq
)sql";

constexpr std::string_view take_lease_sql = R"sql(
UPDATE harnessd_sessions
SET lease_owner = $2, lease_until = now() + $3::bigint * interval '1 millisecond', lease_epoch = lease_epoch + 1
WHERE id = $1 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_until < now())
RETURNING lease_epoch, last_seq
)sql";
constexpr std::string_view lease_owner_sql =
    "SELECT lease_owner FROM harnessd_sessions WHERE id = $1 AND lease_until >= now()";
constexpr std::string_view renew_lease_sql = R"sql(
UPDATE harnessd_sessions SET lease_until = now() + $4::bigint * interval '1 millisecond'
WHERE id = $1 AND lease_epoch = $2::bigint AND lease_owner = $3
)sql";
constexpr std::string_view release_lease_sql = R"sql(
UPDATE harnessd_sessions SET lease_owner = NULL, lease_until = NULL
WHERE id = $1 AND lease_epoch = $2::bigint AND lease_owner = $3
)sql";

constexpr std::string_view cancel_channel = "harnessd_cancel";
constexpr std::string_view decision_channel = "harnessd_decision";

// A commit group holds at most this much; the rest waits for the next one.
constexpr std::size_t group_max_events = 4096;
constexpr std::size_t group_max_bytes = 8 * 1024 * 1024;

std::string num(std::int64_t v) { return std::to_string(v); }

/// A system_error's own text, without the category's message what() appends.
std::string reason_of(const std::system_error& e) {
  std::string text = e.what();
  const std::string suffix = ": " + e.code().message();
  if (text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
    text.resize(text.size() - suffix.size());
  }
  return text;
}

std::int64_t to_int(const std::optional<std::string>& cell) {
  if (!cell) return 0;
  return std::stoll(*cell);
}

[[noreturn]] void throw_failed(const Result& r, std::string_view what) {
  throw std::system_error(errc::unavailable, fmt::format("{}: {}", what, r.error));
}

const Result& checked(const Result& r, std::string_view what) {
  if (!r.ok) throw_failed(r, what);
  return r;
}

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

}  // namespace

struct PostgresStore::State : std::enable_shared_from_this<PostgresStore::State> {
  asio::any_io_executor executor;
  PostgresOptions options;
  std::atomic<bool> stopping{false};

  // --- the pool of read connections (the writer and the listener have their own) ---
  std::size_t pool_max = 1;
  std::mutex pool_mutex;
  std::vector<std::unique_ptr<Connection>> idle;
  std::size_t pool_out = 0;  ///< connections (or connection attempts) handed out
  std::deque<std::shared_ptr<util::Wakeup>> pool_waiters;

  // --- group commit ---
  // Both reset by stop(): the store outlives the io_context they belong to.
  std::optional<asio::strand<asio::any_io_executor>> writer_strand;
  std::shared_ptr<util::Wakeup> writer_wake;
  std::mutex write_mutex;
  std::deque<PendingWrite> queued;

  // --- health and counters ---
  mutable std::mutex health_mutex;
  std::string health = "connecting";
  std::atomic<std::size_t> open_logs{0};
  std::atomic<std::uint64_t> commits{0}, commit_events{0}, commit_failures{0}, commit_us_total{0};
  std::atomic<std::uint64_t> commit_us_max{0};
  std::atomic<std::uint64_t> leases_taken{0}, leases_refused{0}, leases_lost{0}, writes_fenced{0};
  std::atomic<std::uint64_t> cancels_forwarded{0}, cancels_received{0};

  std::mutex cancel_mutex;
  std::function<void(const std::string&)> on_cancel;
  std::function<void(const std::string&)> on_decision;
  Connection* listening = nullptr;  ///< the listener's connection (under cancel_mutex)

  State(asio::any_io_executor ex, PostgresOptions o)
      : executor(std::move(ex)), options(std::move(o)), writer_strand(asio::make_strand(executor)) {
    pool_max = options.pool_size > 2 ? options.pool_size - 2 : 1;
    writer_wake = util::Wakeup::create(*writer_strand);
  }

  void set_health(std::string status) {
    std::lock_guard lock(health_mutex);
    if (status != health && status == "ok") spdlog::info("postgres: connected");
    if (status != health && status != "ok") spdlog::error("postgres: {}", status);
    health = std::move(status);
  }

  // A connection for one use; back to the pool when done (a broken one is dropped).
  struct Pooled {
    std::shared_ptr<State> state;
    std::unique_ptr<Connection> conn;
    Pooled(std::shared_ptr<State> s, std::unique_ptr<Connection> c) : state(std::move(s)), conn(std::move(c)) {}
    Pooled(Pooled&&) = default;
    ~Pooled() {
      if (state) state->give_back(std::move(conn));
    }
    Connection* operator->() const { return conn.get(); }
  };

  asio::awaitable<Pooled> acquire() {
    const auto waiter_executor = co_await asio::this_coro::executor;
    std::shared_ptr<util::Wakeup> wake;
    for (;;) {
      {
        std::lock_guard lock(pool_mutex);
        if (!idle.empty()) {
          std::unique_ptr<Connection> conn = std::move(idle.back());
          idle.pop_back();
          co_return Pooled(shared_from_this(), std::move(conn));
        }
        if (pool_out < pool_max) {
          ++pool_out;
          break;
        }
        if (!wake) wake = util::Wakeup::create(waiter_executor);
        if (std::find(pool_waiters.begin(), pool_waiters.end(), wake) == pool_waiters.end()) {
          pool_waiters.push_back(wake);
        }
      }
      co_await wake->wait();
    }
    std::unique_ptr<Connection> conn;
    try {
      conn = co_await Connection::open(executor, options.url, options.lease_ttl);
    } catch (const std::system_error& e) {
      give_back(nullptr);
      set_health(reason_of(e));
      throw;
    }
    co_return Pooled(shared_from_this(), std::move(conn));
  }

  void give_back(std::unique_ptr<Connection> conn) {
    std::deque<std::shared_ptr<util::Wakeup>> waiters;
    {
      std::lock_guard lock(pool_mutex);
      if (conn && !conn->broken()) {
        idle.push_back(std::move(conn));
      } else {
        --pool_out;
      }
      waiters.swap(pool_waiters);
    }
    // Every waiter looks again: one takes the connection, the others queue
    // up anew. Waking one alone could wake one that no longer waits.
    for (const auto& w : waiters) w->notify();
  }

  // --- group commit: one writer, many sessions' events per transaction ---

  void enqueue(PendingWrite write) {
    {
      std::lock_guard lock(write_mutex);
      queued.push_back(std::move(write));
    }
    if (writer_wake) writer_wake->notify();
  }

  std::vector<PendingWrite> take_group() {
    std::vector<PendingWrite> group;
    std::size_t events = 0;
    std::size_t bytes = 0;
    std::lock_guard lock(write_mutex);
    while (!queued.empty() && (group.empty() || (events + queued.front().count <= group_max_events &&
                                                 bytes + queued.front().events.size() <= group_max_bytes))) {
      events += queued.front().count;
      bytes += queued.front().events.size();
      group.push_back(std::move(queued.front()));
      queued.pop_front();
    }
    return group;
  }

  static void settle(PendingWrite& write, WriteState::Status status, std::string error = {}) {
    write.state->error = std::move(error);
    write.state->status.store(status, std::memory_order_release);
    write.state->wake->notify();
  }

  asio::awaitable<void> writer() {
    std::unique_ptr<Connection> conn;
    asio::steady_timer backoff(*writer_strand);
    const std::string ttl = num(options.lease_ttl.count());
    for (;;) {
      std::vector<PendingWrite> group = take_group();
      if (group.empty()) {
        if (stopping.load()) co_return;
        co_await writer_wake->wait();
        continue;
      }
      std::vector<Statement> statements;
      std::vector<pg::GroupWrite> writes;
      statements.reserve(group.size());
      writes.reserve(group.size());
      for (PendingWrite& w : group) {
        writes.push_back(pg::GroupWrite{w.session_id, w.epoch, w.count});
        statements.push_back(Statement{write_statement,
                                       {w.session_id, num(w.epoch), options.node_id, num(w.at.last_seq),
                                        num(w.at.turns), num(w.at.time_ms), num(w.first_seq), std::move(w.events),
                                        ttl},
                                       true});
      }
      const auto started = std::chrono::steady_clock::now();
      std::optional<std::vector<pg::Settled>> settled;
      bool retried = false;
      std::string broken;
      try {
        if (!conn || conn->broken()) {
          conn = co_await Connection::open(executor, options.url, options.lease_ttl);
          // Parsed and planned once per connection, not once per write.
          std::string name(write_statement);
          std::string sql(write_sql);
          co_await conn->prepare(std::move(name), std::move(sql));
        }
        const std::vector<Result> together = co_await conn->run(statements);
        settled = pg::settle_together(writes, together);
        if (!settled) {
          // One write failed, so the transaction of all of them did: each
          // runs again in a transaction of its own, so that only the one
          // that fails alone fails its turn.
          retried = true;
          const auto failed = std::find_if(together.begin(), together.end(), [](const Result& r) { return !r.ok; });
          spdlog::warn("postgres: a commit group of {} writes failed ({}); each runs again alone", group.size(),
                       failed != together.end() ? failed->error : std::string("no result"));
          const std::vector<Result> alone = co_await conn->run_each(statements);
          settled = pg::settle_alone(writes, alone);
        }
      } catch (const std::system_error& e) {
        broken = reason_of(e);
      }
      if (retried) commit_failures.fetch_add(1);
      if (!broken.empty()) {
        conn.reset();
        commit_failures.fetch_add(1);
        set_health(broken);
        for (PendingWrite& w : group) settle(w, WriteState::failed, broken);
        // Do not spin on a database that is down: the next group waits a little.
        backoff.expires_after(std::chrono::milliseconds(200));
        co_await backoff.async_wait(asio::use_awaitable);
        continue;
      }
      const auto us = static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count());
      commits.fetch_add(1);
      commit_us_total.fetch_add(us);
      for (std::uint64_t seen = commit_us_max.load(); us > seen && !commit_us_max.compare_exchange_weak(seen, us);) {
      }
      set_health("ok");
      for (std::size_t i = 0; i < group.size(); ++i) {
        pg::Settled& s = (*settled)[i];
        switch (s.outcome) {
          case pg::WriteOutcome::committed:
            commit_events.fetch_add(group[i].count);
            settle(group[i], WriteState::committed);
            break;
          case pg::WriteOutcome::fenced:
            writes_fenced.fetch_add(1);
            settle(group[i], WriteState::fenced);
            break;
          case pg::WriteOutcome::failed:
            commit_failures.fetch_add(1);
            spdlog::warn("session {}: write of seq {}..{} not committed: {}", group[i].session_id,
                         group[i].first_seq, group[i].at.last_seq, s.error);
            settle(group[i], WriteState::failed, std::move(s.error));
            break;
        }
      }
    }
  }

  // --- cancels forwarded between nodes: LISTEN/NOTIFY; also the health probe ---

  asio::awaitable<void> listener() {
    asio::steady_timer retry(executor);
    for (;;) {
      try {
        std::unique_ptr<Connection> conn = co_await Connection::open(executor, options.url, options.lease_ttl);
        struct Listening {
          State& state;
          Listening(State& s, Connection* c) : state(s) {
            std::lock_guard lock(state.cancel_mutex);
            state.listening = c;
          }
          ~Listening() {
            std::lock_guard lock(state.cancel_mutex);
            state.listening = nullptr;
          }
        } listening_now(*this, conn.get());
        if (stopping.load()) co_return;
        static constexpr std::array<std::string_view, 2> channels{cancel_channel, decision_channel};
        for (const std::string_view channel : channels) {
          const std::string listen = "LISTEN " + std::string(channel);
          const Statement statement{listen, {}};
          const Result listening = co_await conn->run(statement);
          checked(listening, "LISTEN");
        }
        set_health("ok");
        for (;;) {
          std::vector<pg::Notification> notes = co_await conn->notifications();
          std::function<void(const std::string&)> cancel_handler;
          std::function<void(const std::string&)> decision_handler;
          {
            std::lock_guard lock(cancel_mutex);
            cancel_handler = on_cancel;
            decision_handler = on_decision;
          }
          for (const pg::Notification& n : notes) {
            if (n.channel == decision_channel) {
              if (decision_handler) decision_handler(n.payload);
              continue;
            }
            cancels_received.fetch_add(1);
            if (cancel_handler) cancel_handler(n.payload);
          }
        }
      } catch (const std::system_error& e) {
        set_health(reason_of(e));
      }
      if (stopping.load()) co_return;
      retry.expires_after(std::chrono::milliseconds(500));
      co_await retry.async_wait(asio::use_awaitable);
    }
  }
};

namespace {

/// Renews a lease every third of its TTL while a turn runs.
struct Renewal : std::enable_shared_from_this<Renewal> {
  asio::strand<asio::any_io_executor> strand;
  asio::steady_timer timer;
  bool stopped = false;
  explicit Renewal(const asio::any_io_executor& ex) : strand(asio::make_strand(ex)), timer(strand) {}

  void stop() {
    asio::post(strand, [self = shared_from_this()] {
      self->stopped = true;
      self->timer.cancel();
    });
  }
};

asio::awaitable<void> renew(std::shared_ptr<PostgresStore::State> state, std::shared_ptr<Renewal> renewal,
                            std::string id, std::int64_t epoch) {
  const auto period = std::max(state->options.lease_ttl / 3, std::chrono::milliseconds(10));
  const std::string ttl = num(state->options.lease_ttl.count());
  for (;;) {
    renewal->timer.expires_after(period);
    boost::system::error_code ec;
    co_await renewal->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (renewal->stopped) co_return;
    try {
      auto conn = co_await state->acquire();
      const Statement statement{renew_lease_sql, {id, num(epoch), state->options.node_id, ttl}};
      const Result r = co_await conn->run(statement);
      if (r.ok && r.affected == 0) {
        state->leases_lost.fetch_add(1);
        spdlog::warn("session {}: lease lost to another node; its writes will be refused", id);
        co_return;
      }
    } catch (const std::system_error& e) {
      spdlog::warn("session {}: lease not renewed: {}", id, e.what());
    }
  }
}

class PostgresLog final : public SessionLog {
 public:
  PostgresLog(std::shared_ptr<PostgresStore::State> state, std::string id, json::object header,
              std::vector<json::object> loaded, std::int64_t known_seq)
      : state_(std::move(state)), id_(std::move(id)), header_(std::move(header)), loaded_(std::move(loaded)),
        known_seq_(known_seq) {
    state_->open_logs.fetch_add(1, std::memory_order_relaxed);
  }
  ~PostgresLog() override {
    if (renewal_) renewal_->stop();
    state_->open_logs.fetch_sub(1, std::memory_order_relaxed);
  }

  const json::object& header() const override { return header_; }
  std::vector<json::object> take_loaded_events() override { return std::move(loaded_); }

  void append(std::span<const std::string_view> events, const LogPosition& at) override {
    if (events.empty()) return;
    PendingWrite w;
    w.session_id = id_;
    w.epoch = epoch_;
    w.first_seq = at.last_seq - static_cast<std::int64_t>(events.size()) + 1;
    w.count = events.size();
    std::size_t size = 0;
    for (std::string_view e : events) size += e.size() + 1;
    w.events.reserve(size);
    for (std::string_view e : events) {
      if (!w.events.empty()) w.events += '\n';
      w.events += e;
    }
    w.at = at;
    w.state = std::make_shared<WriteState>();
    if (!wake_) wake_ = util::Wakeup::create(executor_);
    w.state->wake = wake_;
    pending_.push_back(w.state);
    known_seq_ = at.last_seq;
    state_->enqueue(std::move(w));
  }

  bool commits_async() const override { return true; }

  asio::awaitable<void> commit() override {
    while (!pending_.empty()) {
      const std::shared_ptr<WriteState> front = pending_.front();
      while (front->status.load(std::memory_order_acquire) == WriteState::pending) co_await wake_->wait();
      pending_.erase(pending_.begin());
      const WriteState::Status status = front->status.load(std::memory_order_acquire);
      if (status == WriteState::committed) continue;
      // What this node holds of the session is no longer what the database
      // has: the next turn reloads it from there.
      stale_ = true;
      if (status == WriteState::fenced) {
        throw std::system_error(errc::lease_lost, "session " + id_ + ": another node took the session over");
      }
      throw std::system_error(errc::unavailable, "session " + id_ + ": " + front->error);
    }
  }

  asio::awaitable<void> end_turn() override { co_await commit(); }

  asio::awaitable<CatchUp> begin_turn() override {
    executor_ = co_await asio::this_coro::executor;
    auto conn = co_await state_->acquire();
    const Statement take[] = {
        Statement{take_lease_sql, {id_, state_->options.node_id, num(state_->options.lease_ttl.count())}},
        Statement{lease_owner_sql, {id_}}};
    const std::vector<Result> results = co_await conn->run(take);
    const Result& taken = checked(results[0], "taking the session lease");
    if (taken.rows.empty()) {
      const Statement exists{"SELECT 1 FROM harnessd_sessions WHERE id = $1", {id_}};
      const Result found = co_await conn->run(exists);
      if (checked(found, "reading the session").rows.empty()) throw SessionGone(id_);
      state_->leases_refused.fetch_add(1);
      const Result& owner = checked(results[1], "reading the session lease");
      std::string node = owner.rows.empty() || !owner.rows[0][0] ? std::string("(expired)") : *owner.rows[0][0];
      throw LeaseHeld(id_, std::move(node));
    }
    state_->leases_taken.fetch_add(1);
    epoch_ = to_int(taken.rows[0][0]);
    const std::int64_t db_last = to_int(taken.rows[0][1]);
    renewal_ = std::make_shared<Renewal>(state_->executor);
    asio::co_spawn(renewal_->strand, renew(state_, renewal_, id_, epoch_), asio::detached);

    CatchUp caught;
    if (stale_ || db_last != known_seq_) caught = co_await read_newer(*conn.conn, stale_ || db_last < known_seq_);
    co_return caught;
  }

  asio::awaitable<CatchUp> catch_up() override {
    auto conn = co_await state_->acquire();
    CatchUp caught = co_await read_newer(*conn.conn, stale_);
    co_return caught;
  }

  asio::awaitable<void> finish_turn() override {
    if (renewal_) {
      renewal_->stop();
      renewal_.reset();
    }
    try {
      auto conn = co_await state_->acquire();
      const Statement statement{release_lease_sql, {id_, num(epoch_), state_->options.node_id}};
      co_await conn->run(statement);
    } catch (const std::system_error& e) {
      spdlog::warn("session {}: lease not released (it expires): {}", id_, e.what());
    }
  }

  bool closes_open_turn_on_load() const override { return false; }

 private:
  /// The events after the last one this node has (all of them: from_start).
  asio::awaitable<CatchUp> read_newer(Connection& conn, bool from_start) {
    CatchUp caught;
    caught.from_start = from_start;
    const std::int64_t after = from_start ? -1 : known_seq_;
    caught.first_seq = after + 1;
    const Statement statement{
        "SELECT event FROM harnessd_events WHERE session_id = $1 AND seq > $2::bigint ORDER BY seq",
        {id_, num(after)}};
    const Result events = co_await conn.run(statement);
    checked(events, "reading the session's events");
    caught.events.reserve(events.rows.size());
    for (const auto& row : events.rows) caught.events.push_back(row[0].value_or(""));
    known_seq_ = after + static_cast<std::int64_t>(caught.events.size());
    stale_ = false;
    co_return caught;
  }

  std::shared_ptr<PostgresStore::State> state_;
  const std::string id_;
  json::object header_;
  std::vector<json::object> loaded_;
  std::int64_t known_seq_;  ///< the last seq this node has of the session
  std::int64_t epoch_ = 0;  ///< the lease this node's writes are made under
  bool stale_ = false;
  asio::any_io_executor executor_;
  std::shared_ptr<util::Wakeup> wake_;
  std::vector<std::shared_ptr<WriteState>> pending_;
  std::shared_ptr<Renewal> renewal_;
};

std::optional<std::string> optional_text(const std::optional<std::string>& v) { return v; }

}  // namespace

PostgresStore::PostgresStore(asio::any_io_executor executor, PostgresOptions options)
    : state_(std::make_shared<State>(std::move(executor), std::move(options))) {}

PostgresStore::~PostgresStore() { state_->stopping = true; }

void PostgresStore::migrate_now() {
  // Blocking libpq at start only: nothing is served yet.
  const char* keys[] = {"application_name", "dbname", nullptr};
  const char* values[] = {"harnessd", state_->options.url.c_str(), nullptr};
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdbParams(keys, values, 1), &PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn.get());
    while (!message.empty() && message.back() == '\n') message.pop_back();
    throw std::runtime_error("cannot connect to PostgreSQL: " + message);
  }
  const auto exec = [&](std::string_view sql) {
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(conn.get(), std::string(sql).c_str()), &PQclear);
    const ExecStatusType status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      std::string message = PQresultErrorMessage(r.get());
      while (!message.empty() && message.back() == '\n') message.pop_back();
      throw std::runtime_error("PostgreSQL schema: " + message);
    }
    return r;
  };
  // Nodes starting together migrate one after the other.
  exec(migration_lock);
  try {
    exec("CREATE TABLE IF NOT EXISTS harnessd_schema (version integer NOT NULL)");
    auto r = exec("SELECT max(version) FROM harnessd_schema");
    const int found = PQgetisnull(r.get(), 0, 0) ? 0 : std::atoi(PQgetvalue(r.get(), 0, 0));
    if (found > schema_version) {
      throw std::runtime_error("the database has schema version " + std::to_string(found) +
                               ", newer than this harnessd knows (" + std::to_string(schema_version) + ")");
    }
    if (found < 1) {
      exec("BEGIN");
      exec(schema_v1);
      exec("INSERT INTO harnessd_schema (version) VALUES (1)");
      exec("COMMIT");
      spdlog::info("postgres: schema created (version {})", schema_version);
    }
  } catch (...) {
    PQexec(conn.get(), "ROLLBACK");
    PQexec(conn.get(), std::string(migration_unlock).c_str());
    throw;
  }
  exec(migration_unlock);
  state_->set_health("ok");
}

void PostgresStore::start() {
  asio::co_spawn(*state_->writer_strand, state_->writer(), asio::detached);
  asio::co_spawn(asio::make_strand(state_->executor), state_->listener(), asio::detached);
}

asio::awaitable<std::unique_ptr<SessionLog>> PostgresStore::open(SessionHeader header, OpenMode mode) {
  std::shared_ptr<State> state = state_;
  auto conn = co_await state->acquire();
  std::vector<Statement> statements;
  if (mode == OpenMode::create) {
    statements.push_back(Statement{
        "INSERT INTO harnessd_sessions (id, header, created_at, cwd, parent_id, depth, updated_at) "
        "VALUES ($1, $2, $3::bigint, $4, $5, $6::integer, $3::bigint) ON CONFLICT (id) DO NOTHING",
        {header.id, json::serialize(header.to_json()), num(header.created_at_ms), optional_text(header.cwd),
         optional_text(header.parent_session), num(header.delegation_depth)}});
  }
  statements.push_back(Statement{"SELECT header FROM harnessd_sessions WHERE id = $1", {header.id}});
  statements.push_back(
      Statement{"SELECT seq, event FROM harnessd_events WHERE session_id = $1 ORDER BY seq", {header.id}});
  const std::vector<Result> results = co_await conn->run(statements);
  for (const Result& r : results) checked(r, "loading session " + header.id);
  const Result& head = results[results.size() - 2];
  if (head.rows.empty()) co_return nullptr;
  json::value stored = json::parse(head.rows[0][0].value_or("{}"));
  if (!stored.is_object()) throw std::system_error(errc::invalid_log, "session " + header.id + ": header is not an object");
  std::vector<json::object> events;
  const Result& rows = results.back();
  events.reserve(rows.rows.size());
  std::int64_t last = -1;
  for (const auto& row : rows.rows) {
    boost::system::error_code ec;
    json::value event = json::parse(row[1].value_or(""), ec);
    if (ec || !event.is_object()) {
      throw std::system_error(errc::corrupt_line, "session " + header.id + ": event " + row[0].value_or("?") +
                                                      " is not a JSON object");
    }
    events.push_back(std::move(event.get_object()));
    last = to_int(row[0]);
  }
  co_return std::make_unique<PostgresLog>(state, header.id, std::move(stored.get_object()), std::move(events), last);
}

asio::awaitable<ListPage> PostgresStore::list(std::optional<std::string> cursor_text, std::size_t limit) {
  std::optional<ListCursor> cursor;
  if (cursor_text) cursor = parse_list_cursor(*cursor_text);
  std::shared_ptr<State> state = state_;
  auto conn = co_await state->acquire();
  // Newest update first, then by id in byte order: the order of session/list.
  Statement statement{
      "SELECT id, created_at, updated_at, last_seq, turns, parent_id, "
      "(lease_owner IS NOT NULL AND lease_until > now()) "
      "FROM harnessd_sessions "
      "WHERE $1::bigint IS NULL OR updated_at < $1::bigint OR (updated_at = $1::bigint AND id COLLATE \"C\" > $2) "
      "ORDER BY updated_at DESC, id COLLATE \"C\" LIMIT $3::bigint",
      {std::nullopt, std::nullopt, num(static_cast<std::int64_t>(limit) + 1)}};
  if (cursor) {
    statement.params[0] = num(cursor->updated_at);
    statement.params[1] = cursor->id;
  }
  const Result r = co_await conn->run(statement);
  checked(r, "listing sessions");
  ListPage page;
  for (const auto& row : r.rows) {
    if (page.sessions.size() == limit) {
      page.next_cursor = list_cursor(page.sessions.back());
      break;
    }
    page.sessions.push_back(SessionInfo{.id = row[0].value_or(""),
                                        .created_at_ms = to_int(row[1]),
                                        .updated_at_ms = to_int(row[2]),
                                        .last_seq = to_int(row[3]),
                                        .turns = to_int(row[4]),
                                        .parent = row[5],
                                        .leased = row[6] == std::optional<std::string>("t")});
  }
  co_return page;
}

asio::awaitable<std::optional<EventPage>> PostgresStore::read_events(std::string id, std::int64_t after_seq,
                                                                     std::size_t limit, std::size_t max_bytes) {
  std::shared_ptr<State> state = state_;
  auto conn = co_await state->acquire();
  const Statement statements[] = {
      Statement{"SELECT last_seq FROM harnessd_sessions WHERE id = $1", {id}},
      Statement{read_page_sql,
                {id, num(after_seq), num(static_cast<std::int64_t>(limit)), num(static_cast<std::int64_t>(max_bytes))}}};
  const std::vector<Result> results = co_await conn->run(statements);
  const Result& head = checked(results[0], "reading session " + id);
  const Result& rows = checked(results[1], "reading session " + id);
  if (head.rows.empty()) co_return std::nullopt;
  EventPage page;
  page.last_seq = to_int(head.rows[0][0]);
  page.events.reserve(rows.rows.size());
  for (const auto& row : rows.rows) {
    page.events.push_back(row[1].value_or(""));
    // Events committed after the session row was read belong to the page too.
    page.last_seq = std::max(page.last_seq, to_int(row[0]));
  }
  page.more = !rows.rows.empty() && rows.rows.back()[2] == std::optional<std::string>("t");
  co_return page;
}

std::size_t PostgresStore::open_logs() const { return state_->open_logs.load(std::memory_order_relaxed); }

asio::awaitable<bool> PostgresStore::remove(std::string id) {
  std::shared_ptr<State> state = state_;
  auto conn = co_await state->acquire();
  // One statement: the row is locked, and its events and the row go only
  // when no other live node holds the lease (events first: they reference
  // the row). The outer SELECT reads the row as it was before.
  const Statement statement{
      "WITH target AS (SELECT id, lease_owner, "
      "(lease_owner IS NULL OR lease_owner = $2 OR lease_until <= now()) AS free "
      "FROM harnessd_sessions WHERE id = $1 FOR UPDATE), "
      "events AS (DELETE FROM harnessd_events WHERE session_id IN (SELECT id FROM target WHERE free)), "
      "gone AS (DELETE FROM harnessd_sessions WHERE id IN (SELECT id FROM target WHERE free) RETURNING id) "
      "SELECT free, lease_owner FROM target",
      {id, state->options.node_id}};
  const Result r = co_await conn->run(statement);
  checked(r, "deleting session " + id);
  if (r.rows.empty()) co_return false;
  if (r.rows[0][0] != std::optional<std::string>("t")) throw LeaseHeld(id, r.rows[0][1].value_or("?"));
  co_return true;
}

asio::awaitable<bool> PostgresStore::forward_cancel(std::string session_id) {
  std::shared_ptr<State> state = state_;
  auto conn = co_await state->acquire();
  // Only when another live node runs the session: the payload is its id.
  const Statement statement{
      "SELECT pg_notify($3, id) FROM harnessd_sessions WHERE id = $1 AND "
      "lease_owner IS NOT NULL AND lease_owner <> $2 AND lease_until > now()",
      {session_id, state->options.node_id, std::string(cancel_channel)}};
  const Result r = co_await conn->run(statement);
  checked(r, "forwarding a cancel");
  if (r.rows.empty()) co_return false;
  state->cancels_forwarded.fetch_add(1);
  co_return true;
}

void PostgresStore::on_forwarded_cancel(std::function<void(const std::string&)> handler) {
  std::lock_guard lock(state_->cancel_mutex);
  state_->on_cancel = std::move(handler);
}

asio::awaitable<bool> PostgresStore::forward_decision(std::string session_id, std::string message) {
  std::shared_ptr<State> state = state_;
  auto conn = co_await state->acquire();
  const Statement statement{
      "SELECT pg_notify($3, $4) FROM harnessd_sessions WHERE id = $1 AND "
      "lease_owner IS NOT NULL AND lease_owner <> $2 AND lease_until > now()",
      {session_id, state->options.node_id, std::string(decision_channel), message}};
  const Result r = co_await conn->run(statement);
  checked(r, "forwarding a decision");
  co_return !r.rows.empty();
}

void PostgresStore::on_forwarded_decision(std::function<void(const std::string&)> handler) {
  std::lock_guard lock(state_->cancel_mutex);
  state_->on_decision = std::move(handler);
}

std::string PostgresStore::database_status() const {
  std::lock_guard lock(state_->health_mutex);
  return state_->health;
}

std::string PostgresStore::metrics() const {
  const State& s = *state_;
  std::size_t idle = 0;
  std::size_t out = 0;
  {
    std::lock_guard lock(state_->pool_mutex);
    idle = s.idle.size();
    out = s.pool_out;
  }
  const double commits = static_cast<double>(s.commits.load());
  std::string m;
  const auto add = [&m](std::string_view name, std::string_view type, std::string_view help, auto value) {
    m += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
  };
  add("harnessd_pg_pool_size", "gauge", "Read connections the pool may hold (--postgres-pool minus two).", s.pool_max);
  add("harnessd_pg_pool_in_use", "gauge", "Read connections in use now.", out - idle);
  add("harnessd_pg_pool_idle", "gauge", "Read connections open and idle.", idle);
  add("harnessd_pg_commits_total", "counter", "Commit groups written.", s.commits.load());
  add("harnessd_pg_committed_events_total", "counter", "Events committed.", s.commit_events.load());
  add("harnessd_pg_commit_failures_total", "counter", "Commit groups or writes that failed.", s.commit_failures.load());
  add("harnessd_pg_commit_seconds_sum", "counter", "Time spent in commits.",
      static_cast<double>(s.commit_us_total.load()) / 1e6);
  add("harnessd_pg_commit_seconds_mean", "gauge", "Mean commit latency.",
      commits > 0 ? static_cast<double>(s.commit_us_total.load()) / 1e6 / commits : 0.0);
  add("harnessd_pg_commit_seconds_max", "gauge", "Longest commit so far.",
      static_cast<double>(s.commit_us_max.load()) / 1e6);
  add("harnessd_pg_leases_taken_total", "counter", "Session leases taken by this node.", s.leases_taken.load());
  add("harnessd_pg_leases_refused_total", "counter", "Prompts refused: another node held the lease.",
      s.leases_refused.load());
  add("harnessd_pg_leases_lost_total", "counter", "Leases found taken over while renewing.", s.leases_lost.load());
  add("harnessd_pg_writes_fenced_total", "counter", "Writes refused by the lease epoch.", s.writes_fenced.load());
  add("harnessd_pg_cancels_forwarded_total", "counter", "session/cancel sent on to the node running the turn.",
      s.cancels_forwarded.load());
  add("harnessd_pg_cancels_received_total", "counter", "Cancels received from other nodes.",
      s.cancels_received.load());
  add("harnessd_pg_up", "gauge", "1 when the database answered the last time it was asked.",
      database_status() == "ok" ? 1 : 0);
  return m;
}

void PostgresStore::begin_stop() {
  state_->stopping = true;
  if (state_->writer_wake) state_->writer_wake->notify();
  std::lock_guard lock(state_->cancel_mutex);
  if (state_->listening != nullptr) state_->listening->interrupt();
}

void PostgresStore::stop() {
  begin_stop();
  // The store outlives the io_context: what belongs to it goes now.
  state_->writer_wake.reset();
  state_->writer_strand.reset();
  {
    std::lock_guard lock(state_->write_mutex);
    state_->queued.clear();  // their wake-ups are timers too
  }
  std::lock_guard lock(state_->pool_mutex);
  state_->pool_waiters.clear();
}

}  // namespace harnessd::store
