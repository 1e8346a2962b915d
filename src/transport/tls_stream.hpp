// NDJSON over TLS: a ByteStream on an ssl::stream whose handshake is done.
#pragma once

#include "transport/ndjson_stream.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>

#include <memory>
#include <string>

namespace harnessd::transport {

/// `stream` has completed its handshake (as server or client); peer() is `peer`.
std::unique_ptr<ByteStream> make_tls_stream(boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream,
                                            std::string peer);

}  // namespace harnessd::transport
