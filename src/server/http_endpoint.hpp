// The ws:// listener's per-socket entry: HTTP requests (/healthz, /metrics,
// the web UI) and the WebSocket upgrade share one port. Only the files
// behind this header include Beast.
#pragma once

#include <boost/asio/ip/tcp.hpp>

namespace harnessd::server {

class Server;

/// Takes over an accepted socket (already on its own strand).
void serve_http_or_websocket(boost::asio::ip::tcp::socket socket, Server& server);

}  // namespace harnessd::server
