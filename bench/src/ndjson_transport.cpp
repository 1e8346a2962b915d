// NDJSON client transports for harness-bench: a TCP socket, or the pipes of a
// server spawned with `--stdio --store memory`. Both are the wire library's
// NdjsonStream (the daemon's and the client's framing); each read is handed
// to the handler with the frames it completed, and the sends of a batch
// leave in one write.
#include "client_transport.hpp"

#include "transport/child_process.hpp"
#include "transport/ndjson_stream.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>

namespace bench {
namespace asio = boost::asio;
namespace wire = harnessd::transport;
using asio::ip::tcp;

namespace {

// The bench reads whatever the server sends; only a runaway line is cut.
constexpr std::size_t max_line_bytes = std::size_t{1} << 30;

/// The read loop and write batching; derived classes open the stream.
class NdjsonTransport : public ClientTransport {
 public:
  NdjsonTransport(asio::any_io_executor ex, std::size_t read_buffer) : ex_(std::move(ex)), read_buffer_(read_buffer) {}

  void start_reading(FrameHandler& handler) override {
    handler_ = &handler;
    asio::co_spawn(ex_, read_loop(), asio::detached);
  }

  void send(std::string_view frame) override {
    pending_.append(frame);
    pending_.push_back('\n');
  }

  void flush() override {
    if (writing_ || pending_.empty() || closing_ || failed_) return;
    writing_ = true;
    std::swap(pending_, inflight_);
    pending_.clear();
    asio::co_spawn(ex_, write_inflight(), asio::detached);
  }

 protected:
  void open_stream(std::unique_ptr<wire::ByteStream> bytes) {
    // Every read may fill the whole buffer: the bench must keep up with the server.
    stream_.emplace(std::move(bytes), max_line_bytes, read_buffer_, read_buffer_);
  }

  /// Closes everything after a write failure so the reader ends.
  void abort() {
    if (stream_) stream_->bytes().close();
  }

  asio::any_io_executor ex_;
  std::optional<wire::NdjsonStream> stream_;
  bool closing_ = false;

 private:
  asio::awaitable<void> write_inflight() {
    std::string error;
    try {
      const std::string_view block = inflight_;
      co_await stream_->write_blocks(std::span<const std::string_view>(&block, 1));
    } catch (const boost::system::system_error& e) {
      error = e.code().message();
    }
    writing_ = false;
    inflight_.clear();
    if (!error.empty()) {
      if (!closing_ && !failed_) {
        failed_ = true;
        failure_ = "write failed: " + error;
        abort();
      }
      co_return;
    }
    flush();
  }

  asio::awaitable<void> read_loop() {
    for (;;) {
      const std::size_t n = co_await stream_->fill();
      if (n == 0) break;
      const Clock::time_point now = Clock::now();
      handler_->on_read(n, now);
      for (wire::LineFramer::Next next = stream_->next(); next.kind != wire::LineFramer::Kind::need_more;
           next = stream_->next()) {
        if (next.kind == wire::LineFramer::Kind::frame) handler_->on_frame(next.frame, now);
      }
      handler_->on_read_done();
    }
    std::string why = stream_->read_error().empty() ? std::string("server closed the connection")
                                                    : "read failed: " + stream_->read_error();
    if (failed_) why = failure_;
    if (!closing_) handler_->on_closed(why);
  }

  std::size_t read_buffer_;
  FrameHandler* handler_ = nullptr;
  std::string pending_;
  std::string inflight_;
  bool writing_ = false;
  bool failed_ = false;
  std::string failure_;
};

class TcpTransport final : public NdjsonTransport {
 public:
  TcpTransport(asio::any_io_executor ex, const Target& target, std::size_t read_buffer)
      : NdjsonTransport(ex, read_buffer), target_(target) {}

  asio::awaitable<void> open() override {
    tcp::resolver resolver(ex_);
    const std::string port = std::to_string(target_.url.port);
    auto endpoints = co_await resolver.async_resolve(target_.url.host, port, asio::use_awaitable);
    tcp::socket socket(ex_);
    co_await asio::async_connect(socket, endpoints, asio::use_awaitable);
    open_stream(wire::make_tcp_stream(std::move(socket)));
  }

  void close() override {
    closing_ = true;
    abort();
  }

 private:
  Target target_;
};

class StdioTransport final : public NdjsonTransport {
 public:
  StdioTransport(asio::any_io_executor ex, const Target& target, std::size_t read_buffer)
      : NdjsonTransport(ex, read_buffer), target_(target) {}

  ~StdioTransport() override { reap(std::chrono::milliseconds(0)); }

  asio::awaitable<void> open() override {
    wire::ChildSpec spec{.argv = {target_.program, "--stdio", "--store", "memory"}, .quiet = !target_.child_stderr};
    spec.argv.insert(spec.argv.end(), target_.extra_args.begin(), target_.extra_args.end());
    const wire::Child child = wire::spawn_child(spec);
    pid_ = child.pid;
    open_stream(wire::make_child_stream(ex_, child, "stdio"));
    co_return;
  }

  void close() override {
    // stdin EOF makes the server finish and exit; its stdout then ends,
    // which ends the reader.
    closing_ = true;
    if (stream_) stream_->bytes().close_write();
  }

  pid_t child_pid() const override { return pid_; }

  int reap(std::chrono::milliseconds timeout) override {
    if (pid_ <= 0) return -1;
    std::optional<int> status = wire::wait_child(pid_, timeout);
    if (!status) {
      kill(pid_, SIGKILL);
      int killed = 0;
      waitpid(pid_, &killed, 0);
      status = killed;
    }
    pid_ = -1;
    return *status;
  }

 private:
  Target target_;
  pid_t pid_ = -1;
};

}  // namespace

std::unique_ptr<ClientTransport> make_tcp_transport(asio::any_io_executor ex, const Target& target,
                                                    std::size_t read_buffer) {
  return std::make_unique<TcpTransport>(std::move(ex), target, read_buffer);
}

std::unique_ptr<ClientTransport> make_stdio_transport(asio::any_io_executor ex, const Target& target,
                                                      std::size_t read_buffer) {
  return std::make_unique<StdioTransport>(std::move(ex), target, read_buffer);
}

}  // namespace bench
