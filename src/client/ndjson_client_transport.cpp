// The NDJSON client transports: a TCP socket, and the two pipes of a spawned
// `harnessd --stdio` child (whose exit status explains a dropped connection).
// Framing reuses the daemon's LineFramer.
#include "harnessd/client/client_transport.hpp"

#include "harnessd/transport/line_framer.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <csignal>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace harnessd::client {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr std::size_t read_chunk_bytes = 64 * 1024;

/// NDJSON over some byte stream; subclasses supply the bytes.
class NdjsonClientTransport : public ClientTransport {
 public:
  NdjsonClientTransport() : framer_(default_client_max_frame_bytes) {}

  asio::awaitable<ReadResult> read_frame() override {
    for (;;) {
      transport::LineFramer::Next next = framer_.next();
      if (next.kind == transport::LineFramer::Kind::frame) co_return ReadResult{ReadResult::Kind::frame, next.frame};
      if (next.kind == transport::LineFramer::Kind::oversized) co_return ReadResult{ReadResult::Kind::oversized, {}};
      if (at_end_) co_return ReadResult{};
      std::span<char> space = framer_.prepare(read_chunk_bytes);
      error_code ec;
      const std::size_t n = co_await read_some(space, ec);
      if (ec || n == 0) {
        if (ec && ec != asio::error::eof && ec != asio::error::operation_aborted && ec != asio::error::bad_descriptor) {
          read_error_ = ec.message();
        }
        // A last line without '\n' is still a frame.
        framer_.commit(0);
        framer_.feed("\n");
        at_end_ = true;
        continue;
      }
      framer_.commit(n);
    }
  }

  asio::awaitable<void> write_frames(std::span<const std::string> frames) override {
    write_buffer_.clear();
    for (const std::string& frame : frames) {
      write_buffer_ += frame;
      write_buffer_ += '\n';
    }
    co_await write_all(write_buffer_);
    if (write_buffer_.capacity() > (1u << 20)) std::string().swap(write_buffer_);
  }

 protected:
  virtual asio::awaitable<std::size_t> read_some(std::span<char> buffer, error_code& ec) = 0;
  virtual asio::awaitable<void> write_all(std::string_view bytes) = 0;

  std::string read_error_;  // why reading stopped, when it was not a clean EOF

 private:
  transport::LineFramer framer_;
  std::string write_buffer_;
  bool at_end_ = false;
};

// ---------------------------------------------------------------------------
// TCP

class TcpClientTransport final : public NdjsonClientTransport {
 public:
  TcpClientTransport(asio::ip::tcp::socket socket, std::string url) : socket_(std::move(socket)), url_(std::move(url)) {
    error_code ec;
    socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  }

  asio::awaitable<void> close() override {
    force_close();
    co_return;
  }

  void force_close() override {
    error_code ec;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  asio::awaitable<std::string> end_reason() override {
    std::string why = "connection to " + url_ + " closed by the daemon";
    if (!read_error_.empty()) why = "connection to " + url_ + " failed: " + read_error_;
    co_return why;
  }

  std::string describe() const override { return url_; }

 protected:
  asio::awaitable<std::size_t> read_some(std::span<char> buffer, error_code& ec) override {
    std::size_t n = co_await socket_.async_read_some(asio::buffer(buffer.data(), buffer.size()),
                                                     asio::redirect_error(asio::use_awaitable, ec));
    co_return n;
  }

  asio::awaitable<void> write_all(std::string_view bytes) override {
    co_await asio::async_write(socket_, asio::buffer(bytes.data(), bytes.size()), asio::use_awaitable);
  }

 private:
  asio::ip::tcp::socket socket_;
  std::string url_;
};

// ---------------------------------------------------------------------------
// A spawned `harnessd --stdio`

std::string describe_status(pid_t pid, int status) {
  const std::string who = "harnessd (pid " + std::to_string(pid) + ")";
  if (WIFEXITED(status)) return who + " exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return who + " was killed by signal " + std::to_string(WTERMSIG(status));
  return who + " stopped";
}

class ChildProcessTransport final : public NdjsonClientTransport {
 public:
  ChildProcessTransport(const asio::any_io_executor& executor, pid_t pid, int stdin_fd, int stdout_fd,
                        std::string program, std::chrono::milliseconds grace)
      : to_child_(executor, stdin_fd),
        from_child_(executor, stdout_fd),
        pid_(pid),
        program_(std::move(program)),
        grace_(grace) {}

  ~ChildProcessTransport() override {
    force_close();
    if (reaped_) return;
    // Not closed gracefully: give the child a moment after stdin EOF, then stop it.
    if (wait_blocking(std::chrono::milliseconds(200))) return;
    ::kill(pid_, SIGTERM);
    if (wait_blocking(std::chrono::milliseconds(2000))) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }

  asio::awaitable<void> close() override {
    // stdin EOF is the daemon's shutdown: running turns settle, it exits 0.
    // The reader keeps draining stdout meanwhile.
    error_code ec;
    to_child_.close(ec);
    if (!co_await wait_exit(grace_)) {
      ::kill(pid_, SIGTERM);
      if (!co_await wait_exit(grace_)) {
        ::kill(pid_, SIGKILL);
        co_await wait_exit(std::chrono::milliseconds(1000));
      }
    }
    from_child_.close(ec);
  }

  void force_close() override {
    error_code ec;
    to_child_.close(ec);
    from_child_.close(ec);
  }

  asio::awaitable<std::string> end_reason() override {
    // stdout closes when the child exits; give it a moment to be reapable.
    co_await wait_exit(std::chrono::milliseconds(2000));
    std::string why;
    if (reaped_) {
      why = describe_status(pid_, status_);
    } else {
      why = "harnessd (pid " + std::to_string(pid_) + ") closed its stdout";
    }
    if (!read_error_.empty()) why += " (read failed: " + read_error_ + ")";
    co_return why;
  }

  std::string describe() const override { return "stdio:" + program_ + "[" + std::to_string(pid_) + "]"; }

 protected:
  asio::awaitable<std::size_t> read_some(std::span<char> buffer, error_code& ec) override {
    std::size_t n = co_await from_child_.async_read_some(asio::buffer(buffer.data(), buffer.size()),
                                                         asio::redirect_error(asio::use_awaitable, ec));
    co_return n;
  }

  asio::awaitable<void> write_all(std::string_view bytes) override {
    co_await asio::async_write(to_child_, asio::buffer(bytes.data(), bytes.size()), asio::use_awaitable);
  }

 private:
  bool try_reap() {
    if (reaped_) return true;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      reaped_ = true;
      status_ = r == pid_ ? status : 0;
    }
    return reaped_;
  }

  /// Polls for the child's exit for up to `timeout`; true once reaped.
  asio::awaitable<bool> wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (!try_reap() && std::chrono::steady_clock::now() < deadline) {
      timer.expires_after(std::chrono::milliseconds(5));
      error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return reaped_;
  }

  bool wait_blocking(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!try_reap() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return reaped_;
  }

  asio::posix::stream_descriptor to_child_;
  asio::posix::stream_descriptor from_child_;
  pid_t pid_;
  std::string program_;
  std::chrono::milliseconds grace_;
  bool reaped_ = false;
  int status_ = 0;
};

/// Closes the descriptors it holds unless released.
struct FdPair {
  int fd[2] = {-1, -1};
  ~FdPair() {
    for (int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
};

[[noreturn]] void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

}  // namespace

std::unique_ptr<ClientTransport> spawn_stdio(const asio::any_io_executor& executor, const SpawnOptions& options) {
  FdPair in, out;  // in: parent writes -> child stdin; out: child stdout -> parent reads
  if (::pipe2(in.fd, O_CLOEXEC) != 0) throw_errno(errno, "pipe");
  if (::pipe2(out.fd, O_CLOEXEC) != 0) throw_errno(errno, "pipe");

  std::vector<std::string> args{options.program, "--stdio"};
  args.insert(args.end(), options.args.begin(), options.args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], STDOUT_FILENO);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group: a terminal Ctrl-C is the client's to handle (it
  // cancels turns through the protocol), not the daemon's.
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t no_signals, defaults;
  sigemptyset(&no_signals);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &no_signals);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = -1;
  const bool search_path = options.program.find('/') == std::string::npos;
  const int err = search_path ? ::posix_spawnp(&pid, options.program.c_str(), &actions, &attr, argv.data(), environ)
                              : ::posix_spawn(&pid, options.program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) throw_errno(err, "cannot start " + options.program);

  // The child's ends close here; ours move into the transport.
  auto transport = std::make_unique<ChildProcessTransport>(executor, pid, in.fd[1], out.fd[0], options.program,
                                                           options.exit_grace);
  in.fd[1] = -1;
  out.fd[0] = -1;
  return transport;
}

util::Url parse_server_url(std::string_view url) {
  static constexpr std::array<std::string_view, 2> schemes{"tcp", "ws"};
  static constexpr util::UrlRules rules{.schemes = schemes, .path = true, .query = true};
  util::ParsedUrl parsed = util::parse_url(url, rules);
  const std::string quoted = "\"" + std::string(url) + "\"";
  if (!parsed.url) {
    if (parsed.error.kind == util::UrlError::Kind::not_url) {
      throw std::invalid_argument(quoted + " is not a URL: " + parsed.error.reason);
    }
    throw std::invalid_argument(quoted + ": " + parsed.error.reason);
  }
  if (parsed.url->scheme == "tcp" && parsed.url->target() != "/") {
    throw std::invalid_argument(quoted + ": a tcp:// URL has no path");
  }
  return std::move(*parsed.url);
}

asio::awaitable<std::unique_ptr<ClientTransport>> connect_tcp(asio::any_io_executor executor, std::string host,
                                                              std::uint16_t port) {
  asio::ip::tcp::resolver resolver(executor);
  std::string service = std::to_string(port);
  auto endpoints = co_await resolver.async_resolve(host, service, asio::use_awaitable);
  asio::ip::tcp::socket socket(executor);
  co_await asio::async_connect(socket, endpoints, asio::use_awaitable);
  std::string url = util::Url{.scheme = "tcp", .host = std::move(host), .port = port}.to_string();
  std::unique_ptr<ClientTransport> transport = std::make_unique<TcpClientTransport>(std::move(socket), std::move(url));
  co_return transport;
}

asio::awaitable<std::unique_ptr<ClientTransport>> connect_url(asio::any_io_executor executor, std::string url) {
  util::Url parsed = parse_server_url(url);
  std::unique_ptr<ClientTransport> transport;
  if (parsed.scheme == "tcp") {
    transport = co_await connect_tcp(executor, std::move(parsed.host), parsed.port);
  } else {
    transport = co_await connect_websocket(executor, std::move(parsed));
  }
  co_return transport;
}

}  // namespace harnessd::client
