#include "transport/ndjson_transport.hpp"

#include <unistd.h>

namespace harnessd::transport {
namespace asio = boost::asio;

std::string_view to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::stdio: return "stdio";
    case TransportKind::tcp: return "tcp";
    case TransportKind::ws: return "ws";
  }
  return "unknown";
}

std::unique_ptr<ByteStream> make_stdio_stream(const asio::any_io_executor& executor) {
  return make_pipe_stream(asio::posix::stream_descriptor(executor, ::dup(STDIN_FILENO)),
                          asio::posix::stream_descriptor(executor, ::dup(STDOUT_FILENO)), "stdio");
}

NdjsonTransport::NdjsonTransport(std::unique_ptr<ByteStream> stream, TransportKind kind,
                                 std::size_t max_frame_bytes)
    : stream_(std::move(stream), max_frame_bytes), kind_(kind) {}

asio::awaitable<ReadResult> NdjsonTransport::read_frame() { return stream_.read_frame(); }

asio::awaitable<void> NdjsonTransport::write_frames(std::span<const std::string_view> blocks) {
  // Blocks are already NDJSON (frames ending in '\n').
  return stream_.write_blocks(blocks);
}

std::uint64_t NdjsonTransport::bytes_written() const { return stream_.bytes_written(); }

void NdjsonTransport::stop_reading() { stream_.stop_reading(); }

asio::awaitable<void> NdjsonTransport::close() {
  stream_.bytes().close();
  co_return;
}

void NdjsonTransport::force_close() { stream_.bytes().close(); }

}  // namespace harnessd::transport
