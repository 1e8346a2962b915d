// The NDJSON client transports: a TCP socket, TLS over one (tls://), and the
// two pipes of a spawned `harnessd --stdio` child (whose exit status explains
// a dropped connection). All are the wire library's NdjsonStream, as the
// daemon's are.
#include "harnessd/client/client_transport.hpp"
#include "harnessd/client/errors.hpp"

#include "client/tls_client.hpp"
#include "transport/child_process.hpp"
#include "transport/ndjson_stream.hpp"
#include "transport/tls_stream.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <memory>
#include <csignal>
#include <stdexcept>

#include <sys/wait.h>
#include <unistd.h>

namespace harnessd::client {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// One client connection: large reads even when idle.
constexpr std::size_t read_chunk_bytes = 64 * 1024;

/// NDJSON over some byte stream; subclasses say how it ends.
class NdjsonClientTransport : public ClientTransport {
 public:
  explicit NdjsonClientTransport(std::unique_ptr<transport::ByteStream> bytes)
      : stream_(std::move(bytes), default_client_max_frame_bytes, read_chunk_bytes, read_chunk_bytes) {}

  asio::awaitable<ReadResult> read_frame() override { return stream_.read_frame(); }

  asio::awaitable<void> write_frames(std::span<const std::string> frames) override {
    return stream_.write_lines(frames);
  }

  void force_close() override { stream_.bytes().close(); }

 protected:
  transport::NdjsonStream stream_;
};

// ---------------------------------------------------------------------------
// TCP

class TcpClientTransport final : public NdjsonClientTransport {
 public:
  TcpClientTransport(asio::ip::tcp::socket socket, std::string url)
      : NdjsonClientTransport(transport::make_tcp_stream(std::move(socket))), url_(std::move(url)) {}

  /// tls://: `stream` has completed its handshake.
  TcpClientTransport(asio::ssl::stream<asio::ip::tcp::socket> stream, std::string url)
      : NdjsonClientTransport(transport::make_tls_stream(std::move(stream), url)), url_(std::move(url)) {}

  asio::awaitable<void> close() override {
    force_close();
    co_return;
  }

  asio::awaitable<std::string> end_reason() override {
    std::string why = "connection to " + url_ + " closed by the daemon";
    if (!stream_.read_error().empty()) why = "connection to " + url_ + " failed: " + stream_.read_error();
    co_return why;
  }

  std::string describe() const override { return url_; }

 private:
  std::string url_;
};

// ---------------------------------------------------------------------------
// A spawned `harnessd --stdio`

class ChildProcessTransport final : public NdjsonClientTransport {
 public:
  ChildProcessTransport(const asio::any_io_executor& executor, const transport::Child& child, std::string program,
                        std::chrono::milliseconds grace)
      : NdjsonClientTransport(transport::make_child_stream(
            executor, child, "stdio:" + program + "[" + std::to_string(child.pid) + "]")),
        pid_(child.pid),
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
    // Each wait's result goes to a named local: GCC 12 destroys the awaitable
    // of a `!co_await f()` condition twice.
    stream_.bytes().close_write();
    bool exited = co_await wait_exit(grace_);
    if (!exited) {
      ::kill(pid_, SIGTERM);
      exited = co_await wait_exit(grace_);
    }
    if (!exited) {
      ::kill(pid_, SIGKILL);
      const std::chrono::milliseconds last_wait(1000);
      exited = co_await wait_exit(last_wait);
    }
    stream_.bytes().close();
  }

  asio::awaitable<std::string> end_reason() override {
    // stdout closes when the child exits; give it a moment to be reapable.
    const std::chrono::milliseconds moment(2000);
    co_await wait_exit(moment);
    std::string why;
    if (reaped_) {
      why = transport::describe_exit(pid_, status_);
    } else {
      why = "harnessd (pid " + std::to_string(pid_) + ") closed its stdout";
    }
    if (!stream_.read_error().empty()) why += " (read failed: " + stream_.read_error() + ")";
    co_return why;
  }

  std::string describe() const override { return stream_.bytes().peer(); }

 private:
  bool try_reap() {
    if (reaped_) return true;
    if (std::optional<int> status = transport::try_reap(pid_)) {
      reaped_ = true;
      status_ = *status;
    }
    return reaped_;
  }

  /// Waits on the child's pidfd for up to `timeout`; true once reaped.
  asio::awaitable<bool> wait_exit(std::chrono::milliseconds timeout) {
    if (try_reap()) co_return true;
    const auto executor = co_await asio::this_coro::executor;
    const int fd = transport::open_pidfd(pid_);
    if (fd < 0) co_return try_reap();  // reaped meanwhile
    auto pidfd = std::make_shared<asio::posix::stream_descriptor>(executor, fd);
    asio::steady_timer deadline(executor);
    deadline.expires_after(timeout);
    // The timer ends the wait. Its handler may run after this frame is gone
    // (it fired as the child exited): it holds the pidfd only weakly.
    deadline.async_wait([weak = std::weak_ptr(pidfd)](const error_code& ec) {
      if (ec) return;
      if (auto waiting = weak.lock()) waiting->cancel();
    });
    error_code ec;
    co_await pidfd->async_wait(asio::posix::stream_descriptor::wait_read,
                               asio::redirect_error(asio::use_awaitable, ec));
    deadline.cancel();
    co_return try_reap();
  }

  bool wait_blocking(std::chrono::milliseconds timeout) {
    if (std::optional<int> status = transport::wait_child(pid_, timeout)) {
      reaped_ = true;
      status_ = *status;
    }
    return reaped_;
  }

  pid_t pid_;
  std::chrono::milliseconds grace_;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace

std::unique_ptr<ClientTransport> spawn_stdio(const asio::any_io_executor& executor, const SpawnOptions& options) {
  transport::ChildSpec spec{.argv = {options.program, "--stdio"}, .own_process_group = true};
  spec.argv.insert(spec.argv.end(), options.args.begin(), options.args.end());
  const transport::Child child = transport::spawn_child(spec);
  try {
    return std::make_unique<ChildProcessTransport>(executor, child, options.program, options.exit_grace);
  } catch (...) {
    ::close(child.stdin_fd);  // the child reads EOF and exits
    ::close(child.stdout_fd);
    throw;
  }
}

util::Url parse_server_url(std::string_view url) {
  static constexpr std::array<std::string_view, 4> schemes{"tcp", "ws", "tls", "wss"};
  static constexpr util::UrlRules rules{.schemes = schemes, .path = true, .query = true};
  util::ParsedUrl parsed = util::parse_url(url, rules);
  const std::string quoted = "\"" + std::string(url) + "\"";
  if (!parsed.url) {
    if (parsed.error.kind == util::UrlError::Kind::not_url) {
      throw std::invalid_argument(quoted + " is not a URL: " + parsed.error.reason);
    }
    throw std::invalid_argument(quoted + ": " + parsed.error.reason);
  }
  if ((parsed.url->scheme == "tcp" || parsed.url->scheme == "tls") && parsed.url->target() != "/") {
    throw std::invalid_argument(quoted + ": a " + parsed.url->scheme + ":// URL has no path");
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

asio::awaitable<std::unique_ptr<ClientTransport>> connect_tls(asio::any_io_executor executor, std::string host,
                                                              std::uint16_t port, ConnectOptions options) {
  asio::ssl::context context = detail::make_tls_context(options);
  const std::string where = util::Url{.scheme = "tls", .host = host, .port = port}.host_port();
  asio::ssl::stream<asio::ip::tcp::socket> stream(executor, context);
  detail::prepare_tls_connection(stream.native_handle(), host, options, "");

  // One deadline for connecting and the handshake: a tls:// URL that points
  // at a plain NDJSON port would otherwise wait for that daemon's own timeout.
  // The handler only holds this flag; it closes the socket while the flag
  // still points at it.
  auto pending = std::make_shared<asio::ip::tcp::socket*>(&stream.next_layer());
  auto expired = std::make_shared<bool>(false);
  asio::steady_timer deadline(executor);
  deadline.expires_after(detail::connect_timeout);
  deadline.async_wait([pending, expired](error_code ec) {
    if (ec || *pending == nullptr) return;
    *expired = true;
    error_code ignored;
    (*pending)->close(ignored);
  });

  asio::ip::tcp::resolver resolver(executor);
  std::string service = std::to_string(port);
  error_code ec;
  auto endpoints = co_await resolver.async_resolve(host, service, asio::redirect_error(asio::use_awaitable, ec));
  if (!ec) {
    co_await asio::async_connect(stream.next_layer(), endpoints, asio::redirect_error(asio::use_awaitable, ec));
  }
  if (ec) {
    *pending = nullptr;
    deadline.cancel();
    if (*expired) throw boost::system::system_error(asio::error::timed_out);
    throw boost::system::system_error(ec);
  }
  error_code handshake;
  co_await stream.async_handshake(asio::ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, handshake));
  *pending = nullptr;
  deadline.cancel();
  if (*expired) {
    throw ClientError("TLS handshake with " + where + " timed out after " +
                          std::to_string(detail::connect_timeout.count()) + " s",
                      std::make_error_code(std::errc::timed_out));
  }
  if (handshake) detail::throw_handshake_error(stream.native_handle(), handshake, where);

  std::string url = "tls://" + where;
  std::unique_ptr<ClientTransport> transport = std::make_unique<TcpClientTransport>(std::move(stream), std::move(url));
  co_return transport;
}

asio::awaitable<std::unique_ptr<ClientTransport>> connect_url(asio::any_io_executor executor, std::string url,
                                                              ConnectOptions options) {
  util::Url parsed = parse_server_url(url);
  std::unique_ptr<ClientTransport> transport;
  if (parsed.scheme == "tcp") {
    transport = co_await connect_tcp(executor, std::move(parsed.host), parsed.port);
  } else if (parsed.scheme == "tls") {
    transport = co_await connect_tls(executor, std::move(parsed.host), parsed.port, std::move(options));
  } else {
    transport = co_await connect_websocket(executor, std::move(parsed), std::move(options));
  }
  co_return transport;
}

asio::awaitable<std::unique_ptr<ClientTransport>> connect_url(asio::any_io_executor executor, std::string url) {
  ConnectOptions options;
  std::unique_ptr<ClientTransport> transport =
      co_await connect_url(std::move(executor), std::move(url), std::move(options));
  co_return transport;
}

}  // namespace harnessd::client
