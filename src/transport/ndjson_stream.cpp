#include "transport/ndjson_stream.hpp"

#include "detail/kernel_queue.hpp"

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace harnessd::transport {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {

class TcpStream final : public ByteStream {
 public:
  explicit TcpStream(asio::ip::tcp::socket socket) : socket_(std::move(socket)) {
    error_code ec;
    socket_.set_option(asio::ip::tcp::no_delay(true), ec);
    auto endpoint = socket_.remote_endpoint(ec);
    peer_ = ec ? "tcp:?" : "tcp:" + endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  }

  asio::awaitable<std::size_t> read_some(std::span<char> buffer, error_code& ec) override {
    std::size_t n = co_await socket_.async_read_some(asio::buffer(buffer.data(), buffer.size()),
                                                     asio::redirect_error(asio::use_awaitable, ec));
    co_return ec ? 0 : n;
  }

  asio::awaitable<std::size_t> write_some(std::span<const asio::const_buffer> buffers) override {
    std::size_t n = co_await socket_.async_write_some(buffers, asio::use_awaitable);
    co_return n;
  }

  void stop_reading() override {
    error_code ec;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_receive, ec);
  }

  void close_write() override {
    error_code ec;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  }

  void close() override {
    error_code ec;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  std::string peer() const override { return peer_; }

  std::uint64_t kernel_queued_bytes() const override {
    return const_cast<asio::ip::tcp::socket&>(socket_).is_open()
               ? detail::kernel_queued_bytes(const_cast<asio::ip::tcp::socket&>(socket_).native_handle())
               : 0;
  }

 private:
  asio::ip::tcp::socket socket_;
  std::string peer_;
};

/// Reads a descriptor, writes `Out`: a descriptor (write(2)) or a UNIX
/// socket (send with MSG_NOSIGNAL).
template <class Out>
class PipeStream final : public ByteStream {
 public:
  PipeStream(asio::posix::stream_descriptor in, Out out, std::string peer)
      : in_(std::move(in)), out_(std::move(out)), peer_(std::move(peer)) {}

  asio::awaitable<std::size_t> read_some(std::span<char> buffer, error_code& ec) override {
    if (stopped_) co_return 0;
    std::size_t n = co_await in_.async_read_some(asio::buffer(buffer.data(), buffer.size()),
                                                 asio::redirect_error(asio::use_awaitable, ec));
    co_return ec || stopped_ ? 0 : n;
  }

  asio::awaitable<std::size_t> write_some(std::span<const asio::const_buffer> buffers) override {
    std::size_t n = co_await out_.async_write_some(buffers, asio::use_awaitable);
    co_return n;
  }

  void stop_reading() override {
    stopped_ = true;
    error_code ec;
    in_.cancel(ec);
  }

  void close_write() override {
    error_code ec;
    out_.close(ec);
  }

  void close() override {
    error_code ec;
    in_.close(ec);
    out_.close(ec);
  }

  std::string peer() const override { return peer_; }

  std::uint64_t kernel_queued_bytes() const override {
    return out_.is_open() ? detail::kernel_queued_bytes(const_cast<Out&>(out_).native_handle())
                          : 0;
  }

 private:
  asio::posix::stream_descriptor in_;
  Out out_;
  std::string peer_;
  bool stopped_ = false;
};

// Asio hands at most this many buffers to one writev.
constexpr std::size_t max_pieces_per_write = 64;

}  // namespace

std::unique_ptr<ByteStream> make_tcp_stream(asio::ip::tcp::socket socket) {
  return std::make_unique<TcpStream>(std::move(socket));
}

std::unique_ptr<ByteStream> make_pipe_stream(asio::posix::stream_descriptor in, asio::posix::stream_descriptor out,
                                             std::string peer) {
  return std::make_unique<PipeStream<asio::posix::stream_descriptor>>(std::move(in), std::move(out), std::move(peer));
}

std::unique_ptr<ByteStream> make_child_stream(const asio::any_io_executor& executor, const Child& child,
                                              std::string peer) {
  using Socket = asio::local::stream_protocol::socket;
  return std::make_unique<PipeStream<Socket>>(asio::posix::stream_descriptor(executor, child.stdout_fd),
                                              Socket(executor, asio::local::stream_protocol(), child.stdin_fd),
                                              std::move(peer));
}

NdjsonStream::NdjsonStream(std::unique_ptr<ByteStream> stream, std::size_t max_frame_bytes,
                           std::size_t idle_read_bytes, std::size_t read_chunk_bytes)
    : stream_(std::move(stream)),
      framer_(max_frame_bytes),
      idle_read_bytes_(idle_read_bytes),
      read_chunk_bytes_(read_chunk_bytes) {}

asio::awaitable<ReadResult> NdjsonStream::read_frame() {
  for (;;) {
    LineFramer::Next next = framer_.next();
    if (next.kind == LineFramer::Kind::frame) co_return ReadResult{ReadResult::Kind::frame, next.frame};
    if (next.kind == LineFramer::Kind::oversized) co_return ReadResult{ReadResult::Kind::oversized, {}};
    if (read_stopped_) co_return ReadResult{};
    co_await fill();
  }
}

asio::awaitable<std::size_t> NdjsonStream::fill() {
  if (read_stopped_) co_return 0;
  const std::size_t want = framer_.pending_bytes() == 0 ? idle_read_bytes_ : read_chunk_bytes_;
  std::span<char> space = framer_.prepare(want);
  error_code ec;
  const std::size_t n = co_await stream_->read_some(space, ec);
  if (n == 0) {
    if (ec && ec != asio::error::eof && ec != asio::error::operation_aborted && ec != asio::error::bad_descriptor) {
      read_error_ = ec.message();
    }
    // A final line without '\n' at EOF is still a frame.
    framer_.commit(0);
    framer_.feed("\n");
    read_stopped_ = true;
    co_return 0;
  }
  framer_.commit(n);
  co_return n;
}

asio::awaitable<void> NdjsonStream::write_blocks(std::span<const std::string_view> blocks) {
  pieces_.clear();
  for (const std::string_view block : blocks) pieces_.emplace_back(block.data(), block.size());
  co_await write_pieces();
}

asio::awaitable<void> NdjsonStream::write_lines(std::span<const std::string> frames) {
  static constexpr char newline = '\n';
  pieces_.clear();
  for (const std::string& frame : frames) {
    pieces_.emplace_back(frame.data(), frame.size());
    pieces_.emplace_back(&newline, 1);
  }
  co_await write_pieces();
}

asio::awaitable<void> NdjsonStream::write_pieces() {
  std::size_t first = 0;
  while (first < pieces_.size()) {
    const std::size_t count = std::min(pieces_.size() - first, max_pieces_per_write);
    std::size_t n = co_await stream_->write_some(std::span(pieces_.data() + first, count));
    bytes_written_ += n;
    while (first < pieces_.size() && n >= pieces_[first].size()) n -= pieces_[first++].size();
    if (n > 0) pieces_[first] += n;
  }
  if (pieces_.capacity() > 1024) std::vector<asio::const_buffer>().swap(pieces_);
}

void NdjsonStream::stop_reading() {
  read_stopped_ = true;
  stream_->stop_reading();
}

std::uint64_t NdjsonStream::bytes_written() const {
  const std::uint64_t queued = stream_->kernel_queued_bytes();
  return bytes_written_ > queued ? bytes_written_ - queued : 0;
}

}  // namespace harnessd::transport
