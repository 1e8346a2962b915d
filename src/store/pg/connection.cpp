#include "store/pg/connection.hpp"

#include "store/errc.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <libpq-fe.h>
#include <sys/socket.h>

#include <algorithm>
#include <system_error>

namespace harnessd::store::pg {
namespace asio = boost::asio;

namespace {

struct ResultDeleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

/// libpq's message on one line (it ends lines with "\n" and indents hints with "\t").
std::string trimmed(const char* message) {
  std::string out;
  for (const char* p = message != nullptr ? message : ""; *p != '\0'; ++p) {
    const char c = (*p == '\n' || *p == '\t') ? ' ' : *p;
    if (c != ' ' || (!out.empty() && out.back() != ' ')) out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

/// Waits on a socket libpq owns: the descriptor is released, never closed.
asio::awaitable<void> wait_on(const asio::any_io_executor& executor, int fd,
                              asio::posix::descriptor_base::wait_type type) {
  asio::posix::stream_descriptor descriptor(executor, fd);
  struct Release {
    asio::posix::stream_descriptor& d;
    ~Release() { d.release(); }
  } release{descriptor};
  co_await descriptor.async_wait(type, asio::use_awaitable);
}

Result to_result(PGresult* r) {
  Result out;
  switch (PQresultStatus(r)) {
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK: {
      out.ok = true;
      const int rows = PQntuples(r);
      const int cols = PQnfields(r);
      out.rows.reserve(static_cast<std::size_t>(rows));
      for (int i = 0; i < rows; ++i) {
        auto& row = out.rows.emplace_back();
        row.reserve(static_cast<std::size_t>(cols));
        for (int j = 0; j < cols; ++j) {
          if (PQgetisnull(r, i, j)) {
            row.emplace_back();
          } else {
            row.emplace_back(std::string(PQgetvalue(r, i, j), static_cast<std::size_t>(PQgetlength(r, i, j))));
          }
        }
      }
      const char* affected = PQcmdTuples(r);
      if (affected != nullptr && *affected != '\0') out.affected = std::stoll(affected);
      break;
    }
    case PGRES_PIPELINE_ABORTED:
      out.error = "not run: an earlier statement of its batch failed";
      break;
    default: {
      out.error = trimmed(PQresultErrorMessage(r));
      const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      if (state != nullptr) out.sqlstate = state;
      if (out.error.empty()) out.error = PQresStatus(PQresultStatus(r));
    }
  }
  return out;
}

}  // namespace

Connection::Connection(asio::any_io_executor executor, pg_conn* conn)
    : executor_(std::move(executor)), conn_(conn) {}

Connection::~Connection() { PQfinish(conn_); }

void Connection::fail(std::string_view what) {
  broken_ = true;
  throw std::system_error(errc::unavailable, std::string(what) + ": " + trimmed(PQerrorMessage(conn_)));
}

asio::awaitable<std::unique_ptr<Connection>> Connection::open(asio::any_io_executor executor, std::string conninfo,
                                                              std::chrono::milliseconds idle_in_transaction) {
  // Our defaults first; `dbname` last, so what the URL says wins. Keepalives
  // and a user timeout make a vanished server a broken connection, not a
  // wait forever.
  const std::string options =
      "-c idle_in_transaction_session_timeout=" + std::to_string(idle_in_transaction.count());
  const char* keys[] = {"application_name", "keepalives_idle", "keepalives_interval", "keepalives_count",
                        "tcp_user_timeout", "options", "dbname", nullptr};
  const char* values[] = {"harnessd", "5", "2", "3", "10000", options.c_str(), conninfo.c_str(), nullptr};
  pg_conn* raw = PQconnectStartParams(keys, values, 1);
  if (raw == nullptr) throw std::system_error(errc::unavailable, "PostgreSQL: out of memory");
  std::unique_ptr<Connection> conn(new Connection(executor, raw));
  if (PQstatus(raw) == CONNECTION_BAD) conn->fail("cannot connect to PostgreSQL");
  for (;;) {
    const PostgresPollingStatusType polled = PQconnectPoll(raw);
    if (polled == PGRES_POLLING_OK) break;
    if (polled == PGRES_POLLING_FAILED) conn->fail("cannot connect to PostgreSQL");
    // The socket may change between attempts (several hosts): ask each time.
    auto type = asio::posix::descriptor_base::wait_write;
    if (polled == PGRES_POLLING_READING) type = asio::posix::descriptor_base::wait_read;
    co_await wait_on(executor, PQsocket(raw), type);
  }
  if (PQsetnonblocking(raw, 1) != 0) conn->fail("PQsetnonblocking");
  if (PQenterPipelineMode(raw) != 1) conn->fail("PQenterPipelineMode");
  co_return conn;
}

void Connection::interrupt() noexcept {
  const int fd = PQsocket(conn_);
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

asio::awaitable<void> Connection::wait(Wait what) {
  const int fd = PQsocket(conn_);
  if (fd < 0) fail("PostgreSQL connection lost");
  try {
    auto type = asio::posix::descriptor_base::wait_write;
    if (what == Wait::read) type = asio::posix::descriptor_base::wait_read;
    co_await wait_on(executor_, fd, type);
  } catch (const std::system_error&) {
    broken_ = true;
    throw std::system_error(errc::unavailable, "PostgreSQL connection lost");
  }
}

asio::awaitable<void> Connection::flush() {
  for (;;) {
    const int left = PQflush(conn_);
    if (left == 0) co_return;
    if (left < 0) fail("sending to PostgreSQL");
    // The server may wait for us to read before it takes more.
    co_await wait(Wait::write);
    if (PQconsumeInput(conn_) == 0) fail("reading from PostgreSQL");
  }
}

asio::awaitable<Result> Connection::run(const Statement& statement) {
  std::vector<Result> results = co_await run(std::span<const Statement>(&statement, 1));
  co_return std::move(results.front());
}

asio::awaitable<std::vector<Result>> Connection::run(std::span<const Statement> statements) {
  if (broken_) throw std::system_error(errc::unavailable, "PostgreSQL connection lost");
  send(statements, false);
  std::vector<Result> results = co_await finish(statements.size(), false);
  co_return results;
}

asio::awaitable<std::vector<Result>> Connection::run_each(std::span<const Statement> statements) {
  if (broken_) throw std::system_error(errc::unavailable, "PostgreSQL connection lost");
  send(statements, true);
  std::vector<Result> results = co_await finish(statements.size(), true);
  co_return results;
}

void Connection::send(std::span<const Statement> statements, bool each) {
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::string sql;
  for (const Statement& s : statements) {
    values.clear();
    lengths.clear();
    for (const std::optional<std::string>& p : s.params) {
      values.push_back(p ? p->c_str() : nullptr);
      lengths.push_back(p ? static_cast<int>(p->size()) : 0);
    }
    sql.assign(s.sql);
    const int sent =
        s.prepared ? PQsendQueryPrepared(conn_, sql.c_str(), static_cast<int>(values.size()), values.data(),
                                         lengths.data(), nullptr, 0)
                   : PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                                       lengths.data(), nullptr, 0);
    if (sent != 1) fail("sending to PostgreSQL");
    // A sync ends the implicit transaction: the statement commits alone.
    if (each && PQpipelineSync(conn_) != 1) fail("sending to PostgreSQL");
  }
}

asio::awaitable<void> Connection::prepare_once(std::string name, std::string sql) {
  if (std::find(prepared_.begin(), prepared_.end(), name) != prepared_.end()) co_return;
  co_await prepare(name, std::move(sql));
  prepared_.push_back(std::move(name));
}

asio::awaitable<void> Connection::prepare(std::string name, std::string sql) {
  if (broken_) throw std::system_error(errc::unavailable, "PostgreSQL connection lost");
  if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), 0, nullptr) != 1) fail("sending to PostgreSQL");
  const std::vector<Result> results = co_await finish(1, false);
  if (!results.front().ok) {
    throw std::system_error(errc::unavailable, "PostgreSQL refused to prepare " + name + ": " + results.front().error);
  }
}

asio::awaitable<std::vector<Result>> Connection::finish(std::size_t count, bool each) {
  if (!each && PQpipelineSync(conn_) != 1) fail("sending to PostgreSQL");
  co_await flush();
  std::vector<Result> results(count);
  if (each) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::span<Result> one(results.data() + i, 1);
      co_await read_transaction(one);
    }
  } else {
    const std::span<Result> all(results);
    co_await read_transaction(all);
  }
  co_return results;
}

asio::awaitable<void> Connection::read_transaction(std::span<Result> out) {
  // Each statement's results end with a null; the sync's result ends the
  // transaction. An error after the last statement is the commit's own
  // (a deferred constraint, say): the whole transaction is gone.
  std::optional<Result> commit_failure;
  std::size_t index = 0;
  bool have_result = false;
  for (;;) {
    while (PQisBusy(conn_) != 0) {
      co_await wait(Wait::read);
      if (PQconsumeInput(conn_) == 0) fail("reading from PostgreSQL");
    }
    ResultPtr r(PQgetResult(conn_));
    if (!r) {
      if (have_result) ++index;
      have_result = false;
      continue;
    }
    if (PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) break;
    if (!have_result) {
      if (index < out.size()) {
        out[index] = to_result(r.get());
      } else if (!commit_failure) {
        Result extra = to_result(r.get());
        if (!extra.ok) commit_failure = std::move(extra);
      }
    }
    have_result = true;
  }
  for (Result& r : out) {
    if (!r.ok && r.error.empty()) r.error = "PostgreSQL sent no result for the statement";
  }
  // All or nothing: what had succeeded before a failure was rolled back.
  std::string why;
  std::string state;
  if (commit_failure) {
    why = "the transaction failed at commit: " + commit_failure->error;
    state = commit_failure->sqlstate;
  } else {
    const auto failed = std::find_if(out.begin(), out.end(), [](const Result& r) { return !r.ok; });
    if (failed == out.end()) co_return;
    why = "rolled back with its transaction: " + failed->error;
    state = failed->sqlstate;
  }
  for (Result& r : out) {
    if (r.ok || commit_failure) {
      r = Result{};
      r.error = why;
      r.sqlstate = state;
    }
  }
}

asio::awaitable<std::vector<Notification>> Connection::notifications() {
  if (broken_) throw std::system_error(errc::unavailable, "PostgreSQL connection lost");
  std::vector<Notification> out;
  for (;;) {
    if (PQconsumeInput(conn_) == 0) fail("reading from PostgreSQL");
    while (PGnotify* n = PQnotifies(conn_)) {
      out.push_back(Notification{n->relname, n->extra != nullptr ? n->extra : ""});
      PQfreemem(n);
    }
    if (!out.empty()) co_return out;
    co_await wait(Wait::read);
  }
}

}  // namespace harnessd::store::pg
