// NDJSON client transports for harness-bench: a TCP socket, or the pipes of a
// server spawned with `--stdio --store memory`. Reads fill one large buffer
// scanned with memchr; the sends of a batch leave in one write.
#include "client_transport.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace bench {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

/// The NDJSON framing and write batching, over any pair of Asio streams.
/// Derived classes own the streams and implement open()/close().
template <class ReadStream, class WriteStream>
class NdjsonTransport : public ClientTransport {
 public:
  NdjsonTransport(asio::any_io_executor ex, std::size_t read_buffer) : ex_(std::move(ex)), buf_(read_buffer) {}

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
    asio::async_write(writer(), asio::buffer(inflight_),
                      [this](boost::system::error_code ec, std::size_t) { on_written(ec); });
  }

 protected:
  virtual ReadStream& reader() = 0;
  virtual WriteStream& writer() = 0;
  /// Closes everything after a write failure so the reader ends.
  virtual void abort() = 0;

  asio::any_io_executor ex_;
  bool closing_ = false;

 private:
  void on_written(boost::system::error_code ec) {
    writing_ = false;
    inflight_.clear();
    if (ec) {
      if (!closing_ && !failed_) {
        failed_ = true;
        failure_ = "write failed: " + ec.message();
        abort();
      }
      return;
    }
    flush();
  }

  asio::awaitable<void> read_loop() {
    std::size_t carried = 0;  // bytes of an unterminated line at the start of buf_
    std::string why;
    for (;;) {
      if (carried == buf_.size()) buf_.resize(buf_.size() * 2);  // a line longer than the buffer
      boost::system::error_code ec;
      auto space = asio::buffer(buf_.data() + carried, buf_.size() - carried);
      std::size_t n = co_await reader().async_read_some(space, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        why = ec == asio::error::eof ? std::string("server closed the connection") : "read failed: " + ec.message();
        break;
      }
      const Clock::time_point now = Clock::now();
      handler_->on_read(n, now);
      char* const begin = buf_.data();
      char* const end = begin + carried + n;
      char* line = begin;
      char* from = begin + carried;  // no newline before this
      while (from < end) {
        auto* nl = static_cast<char*>(std::memchr(from, '\n', static_cast<std::size_t>(end - from)));
        if (nl == nullptr) break;
        std::size_t len = static_cast<std::size_t>(nl - line);
        if (len > 0 && line[len - 1] == '\r') --len;
        if (len > 0) handler_->on_frame(std::string_view(line, len), now);
        line = nl + 1;
        from = line;
      }
      carried = static_cast<std::size_t>(end - line);
      if (carried > 0 && line != begin) std::memmove(begin, line, carried);
      handler_->on_read_done();
    }
    if (failed_) why = failure_;
    if (!closing_) handler_->on_closed(why);
  }

  FrameHandler* handler_ = nullptr;
  std::vector<char> buf_;
  std::string pending_;
  std::string inflight_;
  bool writing_ = false;
  bool failed_ = false;
  std::string failure_;
};

class TcpTransport final : public NdjsonTransport<tcp::socket, tcp::socket> {
 public:
  TcpTransport(asio::any_io_executor ex, const Target& target, std::size_t read_buffer)
      : NdjsonTransport(ex, read_buffer), target_(target), socket_(ex) {}

  asio::awaitable<void> open() override {
    tcp::resolver resolver(ex_);
    auto endpoints = co_await resolver.async_resolve(target_.url.host, std::to_string(target_.url.port),
                                                    asio::use_awaitable);
    co_await asio::async_connect(socket_, endpoints, asio::use_awaitable);
    socket_.set_option(tcp::no_delay(true));
  }

  void close() override {
    closing_ = true;
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

 protected:
  tcp::socket& reader() override { return socket_; }
  tcp::socket& writer() override { return socket_; }
  void abort() override {
    boost::system::error_code ec;
    socket_.close(ec);
  }

 private:
  Target target_;
  tcp::socket socket_;
};

int reap_child(pid_t pid, std::chrono::milliseconds timeout);

using Pipe = asio::posix::stream_descriptor;

class StdioTransport final : public NdjsonTransport<Pipe, Pipe> {
 public:
  StdioTransport(asio::any_io_executor ex, const Target& target, std::size_t read_buffer)
      : NdjsonTransport(ex, read_buffer), target_(target), out_(ex), in_(ex) {}

  ~StdioTransport() override { reap(std::chrono::milliseconds(0)); }

  asio::awaitable<void> open() override {
    spawn();
    co_return;
  }

  void close() override {
    // stdin EOF makes the server finish and exit; its stdout then ends,
    // which ends the reader.
    closing_ = true;
    boost::system::error_code ec;
    in_.close(ec);
  }

  pid_t child_pid() const override { return pid_; }

  int reap(std::chrono::milliseconds timeout) override {
    if (pid_ <= 0) return -1;
    int status = reap_child(pid_, timeout);
    pid_ = -1;
    return status;
  }

 protected:
  Pipe& reader() override { return out_; }
  Pipe& writer() override { return in_; }
  void abort() override {
    boost::system::error_code ec;
    in_.close(ec);
    out_.close(ec);
  }

 private:
  void spawn() {
    int to_child[2];
    int from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    if (pipe2(from_child, O_CLOEXEC) != 0) {
      ::close(to_child[0]);
      ::close(to_child[1]);
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    if (!target_.child_stderr) posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> args = {target_.program, "--stdio", "--store", "memory"};
    args.insert(args.end(), target_.extra_args.begin(), target_.extra_args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, target_.program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(to_child[0]);
    ::close(from_child[1]);
    if (rc != 0) {
      ::close(to_child[1]);
      ::close(from_child[0]);
      throw std::runtime_error("cannot start " + target_.program + ": " + std::strerror(rc));
    }
    pid_ = pid;
    in_.assign(to_child[1]);
    out_.assign(from_child[0]);
    in_.non_blocking(true);
    out_.non_blocking(true);
  }

  Target target_;
  Pipe out_;  // the server's stdout
  Pipe in_;   // the server's stdin
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

namespace {
int reap_child(pid_t pid, std::chrono::milliseconds timeout) {
  if (pid <= 0) return -1;
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;  // already reaped
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}
}  // namespace

}  // namespace bench
