#include "harnessd/transport/ndjson_transport.hpp"

#include "detail/kernel_queue.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <unistd.h>

namespace harnessd::transport {
namespace asio = boost::asio;
using boost::system::error_code;

std::string_view to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::stdio: return "stdio";
    case TransportKind::tcp: return "tcp";
    case TransportKind::ws: return "ws";
  }
  return "unknown";
}

namespace {

// Reads continuing a partial frame take large chunks (few syscalls for big
// frames); a read with nothing pending, the one an idle connection sits in,
// takes only the framer's idle buffer so a quiet connection holds one page.
constexpr std::size_t read_chunk_bytes = 64 * 1024;
constexpr std::size_t idle_read_bytes = LineFramer::idle_capacity_bytes;

class TcpStream final : public ByteStream {
 public:
  explicit TcpStream(asio::ip::tcp::socket socket) : socket_(std::move(socket)) {
    error_code ec;
    socket_.set_option(asio::ip::tcp::no_delay(true), ec);
    auto endpoint = socket_.remote_endpoint(ec);
    peer_ = ec ? "tcp:?" : "tcp:" + endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  }

  asio::awaitable<std::size_t> read_some(std::span<char> buffer) override {
    error_code ec;
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

class StdioStream final : public ByteStream {
 public:
  explicit StdioStream(const asio::any_io_executor& executor)
      : in_(executor, ::dup(STDIN_FILENO)), out_(executor, ::dup(STDOUT_FILENO)) {}

  asio::awaitable<std::size_t> read_some(std::span<char> buffer) override {
    if (stopped_) co_return 0;
    error_code ec;
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

  void close() override {
    error_code ec;
    in_.close(ec);
    out_.close(ec);
  }

  std::string peer() const override { return "stdio"; }

  std::uint64_t kernel_queued_bytes() const override {
    return out_.is_open() ? detail::kernel_queued_bytes(const_cast<asio::posix::stream_descriptor&>(out_).native_handle())
                          : 0;
  }

 private:
  asio::posix::stream_descriptor in_;
  asio::posix::stream_descriptor out_;
  bool stopped_ = false;
};

}  // namespace

std::unique_ptr<ByteStream> make_tcp_stream(asio::ip::tcp::socket socket) {
  return std::make_unique<TcpStream>(std::move(socket));
}

std::unique_ptr<ByteStream> make_stdio_stream(const asio::any_io_executor& executor) {
  return std::make_unique<StdioStream>(executor);
}

NdjsonTransport::NdjsonTransport(std::unique_ptr<ByteStream> stream, TransportKind kind,
                                 std::size_t max_frame_bytes)
    : stream_(std::move(stream)), kind_(kind), framer_(max_frame_bytes) {}

asio::awaitable<ReadResult> NdjsonTransport::read_frame() {
  for (;;) {
    LineFramer::Next next = framer_.next();
    if (next.kind == LineFramer::Kind::frame) co_return ReadResult{ReadResult::Kind::frame, next.frame};
    if (next.kind == LineFramer::Kind::oversized) co_return ReadResult{ReadResult::Kind::oversized, {}};
    if (read_stopped_) co_return ReadResult{};
    const std::size_t want = framer_.pending_bytes() == 0 ? idle_read_bytes : read_chunk_bytes;
    std::span<char> space = framer_.prepare(want);
    const std::size_t n = co_await stream_->read_some(space);
    if (n == 0) {
      // A final line without '\n' at EOF is still a frame.
      framer_.commit(0);
      framer_.feed("\n");
      read_stopped_ = true;
      continue;
    }
    framer_.commit(n);
  }
}

namespace {
// Asio hands at most this many buffers to one writev.
constexpr std::size_t max_pieces_per_write = 64;
}  // namespace

asio::awaitable<void> NdjsonTransport::write_frames(std::span<const std::string> blocks) {
  // Blocks are already NDJSON (frames ending in '\n'): one gather write
  // sends them from where they are, without a copy.
  pieces_.clear();
  for (const std::string& block : blocks) pieces_.emplace_back(block.data(), block.size());
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

std::uint64_t NdjsonTransport::bytes_written() const {
  const std::uint64_t queued = stream_->kernel_queued_bytes();
  return bytes_written_ > queued ? bytes_written_ - queued : 0;
}

void NdjsonTransport::stop_reading() {
  read_stopped_ = true;
  stream_->stop_reading();
}

asio::awaitable<void> NdjsonTransport::close() {
  stream_->close();
  co_return;
}

void NdjsonTransport::force_close() { stream_->close(); }

}  // namespace harnessd::transport
