// The daemon's NDJSON connections (TCP sockets and the stdio pipe pair): an
// NdjsonStream behind the server's FrameTransport.
#pragma once

#include "harnessd/transport/frame_transport.hpp"
#include "transport/ndjson_stream.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstdint>
#include <memory>

namespace harnessd::transport {

/// The daemon's stdin and stdout (duplicated descriptors).
std::unique_ptr<ByteStream> make_stdio_stream(const boost::asio::any_io_executor& executor);

class NdjsonTransport final : public FrameTransport {
 public:
  NdjsonTransport(std::unique_ptr<ByteStream> stream, TransportKind kind, std::size_t max_frame_bytes);

  boost::asio::awaitable<ReadResult> read_frame() override;
  boost::asio::awaitable<void> write_frames(std::span<const std::string_view> blocks) override;
  void stop_reading() override;
  boost::asio::awaitable<void> close() override;
  void force_close() override;
  TransportKind kind() const override { return kind_; }
  std::string peer() const override { return stream_.bytes().peer(); }
  std::uint64_t bytes_written() const override;

 private:
  NdjsonStream stream_;
  TransportKind kind_;
};

}  // namespace harnessd::transport
