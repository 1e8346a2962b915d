// One libpq connection driven by Asio: every call is asynchronous (libpq's
// non-blocking API, waits on PQsocket), so no I/O thread ever blocks on the
// database. Statements go out in pipeline mode: a batch costs one round trip
// and commits as one implicit transaction (run), or as one transaction per
// statement (run_each).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pg_conn;

namespace harnessd::store::pg {

/// SQL with $n parameters, all sent as text; nullopt is SQL NULL. With
/// `prepared`, `sql` is the name of a statement prepare() made.
struct Statement {
  std::string_view sql;
  std::vector<std::optional<std::string>> params;
  bool prepared = false;
};

/// One statement's outcome: its rows as text cells, or the server's error.
struct Result {
  bool ok = false;
  std::string error;     ///< when !ok
  std::string sqlstate;  ///< when !ok and the server sent one
  std::vector<std::vector<std::optional<std::string>>> rows;
  std::int64_t affected = 0;  ///< rows an INSERT/UPDATE/DELETE touched
};

/// A NOTIFY received on a LISTENed channel.
struct Notification {
  std::string channel;
  std::string payload;
};

class Connection {
 public:
  /// Connects (PQconnectStart/PQconnectPoll). `conninfo` is a libpq URI or
  /// key=value string; empty takes the PG* environment variables. The server
  /// ends a transaction of this connection left open longer than
  /// `idle_in_transaction` (a node frozen mid-commit must not hold row locks
  /// that the next lease owner waits for). Throws
  /// std::system_error(errc::unavailable) with libpq's message.
  static boost::asio::awaitable<std::unique_ptr<Connection>> open(boost::asio::any_io_executor executor,
                                                                  std::string conninfo,
                                                                  std::chrono::milliseconds idle_in_transaction);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Runs `statements` as one pipeline and one implicit transaction, and
  /// returns each one's result in order. All or nothing: when a statement
  /// fails, or the commit itself does (a deferred constraint), every result
  /// comes back !ok, those that had succeeded before included (they were
  /// rolled back). Throws std::system_error(errc::unavailable) when the
  /// connection breaks, after which broken() is true. One call at a time.
  boost::asio::awaitable<std::vector<Result>> run(std::span<const Statement> statements);
  boost::asio::awaitable<Result> run(const Statement& statement);
  /// Runs `statements` as one pipeline (one round trip), each in its own
  /// implicit transaction, in order: a failed statement fails alone. Throws
  /// like run().
  boost::asio::awaitable<std::vector<Result>> run_each(std::span<const Statement> statements);

  /// Prepares `sql` as `name` on this connection (parsed and planned once).
  /// Throws like run(), and for SQL the server refuses.
  boost::asio::awaitable<void> prepare(std::string name, std::string sql);
  /// prepare(), unless this connection prepared `name` already: for
  /// statements that run on whichever pooled connection is free.
  boost::asio::awaitable<void> prepare_once(std::string name, std::string sql);

  /// Waits for notifications of the channels this connection LISTENs on.
  /// Throws like run().
  boost::asio::awaitable<std::vector<Notification>> notifications();

  bool broken() const noexcept { return broken_; }
  /// Thread-safe: ends the connection's socket, so a wait in progress
  /// returns (and fails) at once.
  void interrupt() noexcept;

 private:
  Connection(boost::asio::any_io_executor executor, pg_conn* conn);
  enum class Wait { read, write };
  boost::asio::awaitable<void> wait(Wait what);
  [[noreturn]] void fail(std::string_view what);
  boost::asio::awaitable<void> flush();
  /// Sends `statements`, with a sync (a transaction's end) after each one
  /// when `each`, else one after the last.
  void send(std::span<const Statement> statements, bool each);
  /// Syncs the pipeline and reads `count` statements' results: one
  /// transaction, or `count` of them when `each`.
  boost::asio::awaitable<std::vector<Result>> finish(std::size_t count, bool each);
  /// Reads one transaction's results, up to its sync, into `out`.
  boost::asio::awaitable<void> read_transaction(std::span<Result> out);

  boost::asio::any_io_executor executor_;
  pg_conn* conn_;
  bool broken_ = false;
  std::vector<std::string> prepared_;  ///< names prepare_once() prepared (a few)
};

}  // namespace harnessd::store::pg
