// The ws:// listener's per-socket entry: HTTP requests (/healthz, /metrics,
// the web UI) and the WebSocket upgrade share one port. Only the files
// behind this header include Beast.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <memory>

namespace boost::asio::ssl {
class context;
}

namespace harnessd::server {

class Server;

/// Takes over an accepted socket (already on its own strand). With `tls`
/// (wss://) the connection starts with a TLS handshake under that identity.
/// `slot`: the connection's place under the connection limits, held until
/// the socket closes.
void serve_http_or_websocket(boost::asio::ip::tcp::socket socket, Server& server,
                             std::shared_ptr<boost::asio::ssl::context> tls, std::shared_ptr<void> slot);

}  // namespace harnessd::server
