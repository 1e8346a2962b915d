#include "store/postgres_store.hpp"

#include "store/errc.hpp"
#include "store/pg/connection.hpp"
#include "store/pg/lease_rounds.hpp"
#include "store/pg/leases.hpp"
#include "store/pg/listener.hpp"
#include "store/pg/pool.hpp"
#include "store/pg/text.hpp"
#include "store/pg/writer.hpp"
#include "util/wakeup.hpp"

#include <boost/asio/this_coro.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fmt/format.h>
#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>

namespace harnessd::store {
namespace asio = boost::asio;
namespace json = boost::json;
using pg::checked;
using pg::Connection;
using pg::num;
using pg::PendingWrite;
using pg::Result;
using pg::Statement;
using pg::to_int;
using pg::WriteState;

namespace {

constexpr int schema_version = 2;
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

// Version 2 keeps events in batches: one row per write (the events of one
// flush of a turn, up to 64), not one per event. Per-event rows cost the
// database a heap and an index insertion and a foreign-key lookup of the
// session for every event, most of its CPU at 100 events a turn. The
// events stay readable one per row through the view harnessd_events, with
// the columns version 1 had. A version-1 database is converted in place,
// each old event a batch of one.
constexpr std::string_view schema_v2 = R"sql(
-- A node of version 1 still running must not commit events between the copy
-- and the drop: its writes wait here, then fail (all nodes upgrade together).
LOCK TABLE harnessd_sessions, harnessd_events IN EXCLUSIVE MODE;
CREATE TABLE harnessd_event_batches (
  session_id text   NOT NULL,
  first_seq  bigint NOT NULL,
  last_seq   bigint NOT NULL,
  events     text   NOT NULL,                -- first_seq..last_seq, a line each, byte for byte the notified params.event
  PRIMARY KEY (session_id, first_seq)
);
INSERT INTO harnessd_event_batches (session_id, first_seq, last_seq, events)
  SELECT session_id, seq, seq, event FROM harnessd_events;
DROP TABLE harnessd_events;
CREATE VIEW harnessd_events AS
  SELECT b.session_id, b.first_seq + e.n - 1 AS seq, e.event
  FROM harnessd_event_batches b, string_to_table(b.events, E'\n') WITH ORDINALITY AS e(event, n);
-- A batch over 2 kB is compressed on insert; pglz took a third of the
-- database's CPU at 100 events a turn, lz4 (where the server has it; only
-- the speed differs) a fraction of that.
DO $$ BEGIN
  ALTER TABLE harnessd_event_batches ALTER COLUMN events SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN NULL;
END $$;
)sql";

// Both reads below start at the first batch that holds an event after seq
// $2 of session $1: the one holding $2 + 1 (a session's batches follow each
// other without a gap), or the last one when there is none.
constexpr std::string_view read_after_sql = R"sql(
SELECT first_seq, events FROM harnessd_event_batches
WHERE session_id = $1 AND first_seq >= coalesce(
  (SELECT max(first_seq) FROM harnessd_event_batches WHERE session_id = $1 AND first_seq - 1 <= $2::bigint), 0)
ORDER BY first_seq
)sql";

// A page of session/events, capped in SQL: the batches that can hold its
// events (at most $3 + 1: each holds one at least, but the first may hold
// only earlier ones), and no more once those after the first hold $4 bytes.
// `more`: a batch follows the row (read on its last row). octet_length
// reads a stored value's size without decompressing it.
constexpr std::string_view read_page_sql = R"sql(
SELECT first_seq, events, more FROM (
  SELECT first_seq, events, octet_length(events) AS size,
         sum(octet_length(events)) OVER w - first_value(octet_length(events)) OVER w AS bytes,
         lead(first_seq) OVER w IS NOT NULL AS more
  FROM harnessd_event_batches
  WHERE session_id = $1 AND first_seq >= coalesce(
    (SELECT max(first_seq) FROM harnessd_event_batches WHERE session_id = $1 AND first_seq - 1 <= $2::bigint), 0)
  WINDOW w AS (ORDER BY first_seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
  ORDER BY first_seq LIMIT $3::bigint + 1) page
WHERE bytes - size < $4::bigint
ORDER BY first_seq
)sql";

/// Calls `each(seq, event)` for the events of a batch row (first_seq, events).
template <class Each>
void for_each_event(const std::optional<std::string>& first_seq, const std::optional<std::string>& events, Each&& each) {
  std::int64_t seq = to_int(first_seq);
  const std::string_view text = events ? std::string_view(*events) : std::string_view();
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find('\n', start);
    each(seq++, text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
}

constexpr std::string_view lease_owner_sql =
    "SELECT lease_owner FROM harnessd_sessions WHERE id = $1 AND lease_until >= now()";

}  // namespace

// What the store's parts share: the options, the stop flag, the health
// the parts report, the counters of the store's own calls; and the parts.
// Logs and coroutines hold it as long as they need any of it.
struct PostgresStore::State {
  State(asio::any_io_executor ex, PostgresOptions o)
      : executor(std::move(ex)),
        options(std::move(o)),
        pool(std::make_shared<pg::Pool>(executor, options.url, options.lease_ttl,
                                        options.pool_size > 2 ? options.pool_size - 2 : 1, report_health())),
        writer(executor, options.url, options.lease_ttl, options.node_id, stopping, report_health()),
        listener(executor, options.url, options.lease_ttl, stopping, report_health()),
        leases(pool, options.node_id, options.lease_ttl, stopping),
        lease_rounds(executor, pool, options.node_id, options.lease_ttl, stopping) {}

  void set_health(std::string status) {
    std::lock_guard lock(health_mutex);
    if (status != health && status == "ok") spdlog::info("postgres: connected");
    if (status != health && status != "ok") spdlog::error("postgres: {}", status);
    health = std::move(status);
  }

  /// For the parts, which this state outlives (the pool is told only while
  /// a holder of the state waits on acquire()).
  std::function<void(std::string)> report_health() {
    return [this](std::string status) { set_health(std::move(status)); };
  }

  asio::any_io_executor executor;
  PostgresOptions options;
  std::atomic<bool> stopping{false};

  // --- health and counters (the parts keep their own) ---
  mutable std::mutex health_mutex;
  std::string health = "connecting";
  std::atomic<std::size_t> open_logs{0};
  std::atomic<std::uint64_t> leases_taken{0}, leases_refused{0};
  std::atomic<std::uint64_t> cancels_forwarded{0};

  // --- the parts ---
  std::shared_ptr<pg::Pool> pool;  ///< read connections (the writer and the listener have their own)
  pg::Writer writer;
  pg::Listener listener;
  pg::Leases leases;
  pg::LeaseRounds lease_rounds;
};

namespace {

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
    state_->writer.enqueue(std::move(w));
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
    const std::optional<pg::LeaseRounds::Taken> taken = co_await state_->lease_rounds.take(id_);
    if (!taken) {
      // Refused: say why (a read of its own, on this path only).
      auto conn = co_await state_->pool->acquire();
      const Statement why[] = {Statement{"SELECT 1 FROM harnessd_sessions WHERE id = $1", {id_}},
                               Statement{lease_owner_sql, {id_}}};
      const std::vector<Result> found = co_await conn->run(why);
      if (checked(found[0], "reading the session").rows.empty()) throw SessionGone(id_);
      state_->leases_refused.fetch_add(1);
      const Result& owner = checked(found[1], "reading the session lease");
      std::string node = owner.rows.empty() || !owner.rows[0][0] ? std::string("(expired)") : *owner.rows[0][0];
      throw LeaseHeld(id_, std::move(node));
    }
    state_->leases_taken.fetch_add(1);
    epoch_ = taken->epoch;
    leased_ = true;  // from here on the caller's finish_turn gives it back, also when this throws
    if (renewal_) renewal_->stop();
    // The renewal keeps the state alive while it runs, as a log does.
    renewal_ = pg::Renewal::start(state_->executor, std::shared_ptr<pg::Leases>(state_, &state_->leases), id_, epoch_);

    CatchUp caught;
    if (stale_ || taken->last_seq != known_seq_) {
      auto conn = co_await state_->pool->acquire();
      caught = co_await read_newer(*conn.conn, stale_ || taken->last_seq < known_seq_);
    }
    co_return caught;
  }

  asio::awaitable<CatchUp> catch_up() override {
    auto conn = co_await state_->pool->acquire();
    CatchUp caught = co_await read_newer(*conn.conn, stale_);
    co_return caught;
  }

  asio::awaitable<void> finish_turn() override {
    if (renewal_) {
      renewal_->stop();
      renewal_.reset();
    }
    if (!leased_) co_return;  // begin_turn was refused, or failed before the lease
    leased_ = false;
    try {
      co_await state_->lease_rounds.release(id_, epoch_);
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
    const Statement statement{read_after_sql, {id_, num(after)}};
    const Result batches = co_await conn.run(statement);
    checked(batches, "reading the session's events");
    for (const auto& row : batches.rows) {
      for_each_event(row[0], row[1], [&](std::int64_t seq, std::string_view event) {
        if (seq > after) caught.events.emplace_back(event);
      });
    }
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
  bool leased_ = false;     ///< begin_turn took the lease and finish_turn has not given it back
  bool stale_ = false;
  asio::any_io_executor executor_;
  std::shared_ptr<util::Wakeup> wake_;
  std::vector<std::shared_ptr<WriteState>> pending_;
  std::shared_ptr<pg::Renewal> renewal_;
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
  // "relation ... already exists, skipping" on every start is no news: libpq
  // would print it to stderr.
  exec("SET client_min_messages = warning");
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
      spdlog::info("postgres: schema created (version 1)");
    }
    if (found < 2) {
      exec("BEGIN");
      exec(schema_v2);
      exec("UPDATE harnessd_schema SET version = 2");
      exec("COMMIT");
      spdlog::info("postgres: schema upgraded to version 2");
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
  state_->writer.start();
  state_->lease_rounds.start();
  state_->listener.start();
}

asio::awaitable<std::unique_ptr<SessionLog>> PostgresStore::open(SessionHeader header, OpenMode mode) {
  std::shared_ptr<State> state = state_;
  auto conn = co_await state->pool->acquire();
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
      Statement{"SELECT first_seq, events FROM harnessd_event_batches WHERE session_id = $1 ORDER BY first_seq",
                {header.id}});
  const std::vector<Result> results = co_await conn->run(statements);
  for (const Result& r : results) checked(r, "loading session " + header.id);
  const Result& head = results[results.size() - 2];
  if (head.rows.empty()) co_return nullptr;
  json::value stored = json::parse(head.rows[0][0].value_or("{}"));
  if (!stored.is_object()) throw std::system_error(errc::invalid_log, "session " + header.id + ": header is not an object");
  std::vector<json::object> events;
  const Result& rows = results.back();
  std::int64_t last = -1;
  for (const auto& row : rows.rows) {
    for_each_event(row[0], row[1], [&](std::int64_t seq, std::string_view text) {
      boost::system::error_code ec;
      json::value event = json::parse(text, ec);
      if (ec || !event.is_object()) {
        throw std::system_error(errc::corrupt_line,
                                "session " + header.id + ": event " + std::to_string(seq) + " is not a JSON object");
      }
      events.push_back(std::move(event.get_object()));
      last = seq;
    });
  }
  co_return std::make_unique<PostgresLog>(state, header.id, std::move(stored.get_object()), std::move(events), last);
}

asio::awaitable<ListPage> PostgresStore::list(std::optional<std::string> cursor_text, std::size_t limit) {
  std::optional<ListCursor> cursor;
  if (cursor_text) cursor = parse_list_cursor(*cursor_text);
  std::shared_ptr<State> state = state_;
  auto conn = co_await state->pool->acquire();
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
  auto conn = co_await state->pool->acquire();
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
  // The page ends at `limit` events, or before the event that would take it
  // past max_bytes (a first event larger than that comes alone).
  std::size_t bytes = 0;
  bool full = false;
  for (const auto& row : rows.rows) {
    for_each_event(row[0], row[1], [&](std::int64_t seq, std::string_view event) {
      // Events committed after the session row was read belong to the page too.
      page.last_seq = std::max(page.last_seq, seq);
      if (seq <= after_seq || full) return;
      if (page.events.size() == limit || (!page.events.empty() && bytes + event.size() > max_bytes)) {
        full = true;
        page.more = true;
        return;
      }
      bytes += event.size();
      page.events.emplace_back(event);
    });
  }
  if (!full) page.more = !rows.rows.empty() && rows.rows.back()[2] == std::optional<std::string>("t");
  co_return page;
}

std::size_t PostgresStore::open_logs() const { return state_->open_logs.load(std::memory_order_relaxed); }

asio::awaitable<bool> PostgresStore::remove(std::string id) {
  std::shared_ptr<State> state = state_;
  auto conn = co_await state->pool->acquire();
  // One statement: the row is locked, and its events and the row go only
  // when no other live node holds the lease (events first: they reference
  // the row). The outer SELECT reads the row as it was before.
  const Statement statement{
      "WITH target AS (SELECT id, lease_owner, "
      "(lease_owner IS NULL OR lease_owner = $2 OR lease_until <= now()) AS free "
      "FROM harnessd_sessions WHERE id = $1 FOR UPDATE), "
      "events AS (DELETE FROM harnessd_event_batches WHERE session_id IN (SELECT id FROM target WHERE free)), "
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
  auto conn = co_await state->pool->acquire();
  // Only when another live node runs the session: the payload is its id.
  const Statement statement{
      "SELECT pg_notify($3, id) FROM harnessd_sessions WHERE id = $1 AND "
      "lease_owner IS NOT NULL AND lease_owner <> $2 AND lease_until > now()",
      {session_id, state->options.node_id, std::string(pg::cancel_channel)}};
  const Result r = co_await conn->run(statement);
  checked(r, "forwarding a cancel");
  if (r.rows.empty()) co_return false;
  state->cancels_forwarded.fetch_add(1);
  co_return true;
}

void PostgresStore::on_forwarded_cancel(std::function<void(const std::string&)> handler) {
  state_->listener.on_cancel(std::move(handler));
}

asio::awaitable<bool> PostgresStore::forward_decision(std::string session_id, std::string message) {
  std::shared_ptr<State> state = state_;
  auto conn = co_await state->pool->acquire();
  const Statement statement{
      "SELECT pg_notify($3, $4) FROM harnessd_sessions WHERE id = $1 AND "
      "lease_owner IS NOT NULL AND lease_owner <> $2 AND lease_until > now()",
      {session_id, state->options.node_id, std::string(pg::decision_channel), message}};
  const Result r = co_await conn->run(statement);
  checked(r, "forwarding a decision");
  co_return !r.rows.empty();
}

void PostgresStore::on_forwarded_decision(std::function<void(const std::string&)> handler) {
  state_->listener.on_decision(std::move(handler));
}

std::string PostgresStore::database_status() const {
  std::lock_guard lock(state_->health_mutex);
  return state_->health;
}

std::string PostgresStore::metrics() const {
  const State& s = *state_;
  const pg::Pool::Usage pool = s.pool->usage();
  const pg::Writer::Counters& w = s.writer.counters();
  const double commits = static_cast<double>(w.commits.load());
  std::string m;
  const auto add = [&m](std::string_view name, std::string_view type, std::string_view help, auto value) {
    m += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, value);
  };
  add("harnessd_pg_pool_size", "gauge", "Read connections the pool may hold (--postgres-pool minus two).",
      s.pool->max());
  add("harnessd_pg_pool_in_use", "gauge", "Read connections in use now.", pool.out - pool.idle);
  add("harnessd_pg_pool_idle", "gauge", "Read connections open and idle.", pool.idle);
  add("harnessd_pg_commits_total", "counter", "Commit groups written.", w.commits.load());
  add("harnessd_pg_committed_events_total", "counter", "Events committed.", w.commit_events.load());
  add("harnessd_pg_commit_failures_total", "counter", "Commit groups or writes that failed.", w.commit_failures.load());
  add("harnessd_pg_commit_seconds_sum", "counter", "Time spent in commits.",
      static_cast<double>(w.commit_us_total.load()) / 1e6);
  add("harnessd_pg_commit_seconds_mean", "gauge", "Mean commit latency.",
      commits > 0 ? static_cast<double>(w.commit_us_total.load()) / 1e6 / commits : 0.0);
  add("harnessd_pg_commit_seconds_max", "gauge", "Longest commit so far.",
      static_cast<double>(w.commit_us_max.load()) / 1e6);
  add("harnessd_pg_leases_taken_total", "counter", "Session leases taken by this node.", s.leases_taken.load());
  add("harnessd_pg_lease_rounds_total", "counter",
      "Transactions that took and gave back leases (all asked since the last one, together).",
      s.lease_rounds.rounds());
  add("harnessd_pg_leases_refused_total", "counter", "Prompts refused: another node held the lease.",
      s.leases_refused.load());
  add("harnessd_pg_leases_lost_total", "counter", "Leases found taken over while renewing.", s.leases.lost());
  add("harnessd_pg_writes_fenced_total", "counter", "Writes refused by the lease epoch.", w.writes_fenced.load());
  add("harnessd_pg_cancels_forwarded_total", "counter", "session/cancel sent on to the node running the turn.",
      s.cancels_forwarded.load());
  add("harnessd_pg_cancels_received_total", "counter", "Cancels received from other nodes.",
      s.listener.cancels_received());
  add("harnessd_pg_up", "gauge", "1 when the database answered the last time it was asked.",
      database_status() == "ok" ? 1 : 0);
  return m;
}

void PostgresStore::begin_stop() {
  state_->stopping = true;
  state_->writer.begin_stop();
  state_->lease_rounds.begin_stop();
  state_->listener.begin_stop();
}

void PostgresStore::stop() {
  begin_stop();
  // The store outlives the io_context: what belongs to it goes now.
  state_->writer.stop();
  state_->lease_rounds.stop();
  state_->pool->stop();
}

}  // namespace harnessd::store
