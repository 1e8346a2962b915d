// The daemon's TLS server identity (--tls-cert, --tls-key) for wss:// and
// tls:// listeners: modern defaults (TLS 1.2 or newer, the server's cipher
// order, ALPN http/1.1), and a reload on SIGHUP that new connections pick
// up while existing ones keep the identity they were accepted with.
#pragma once

#include <boost/asio/ssl/context.hpp>

#include <memory>
#include <mutex>
#include <string>

namespace harnessd::server {

class TlsContext {
 public:
  /// Loads the pair. Throws std::runtime_error naming the file and what is
  /// wrong with it (unreadable, not PEM, key does not match).
  TlsContext(std::string cert_file, std::string key_file);

  /// Thread-safe: the identity for a connection accepted now.
  std::shared_ptr<boost::asio::ssl::context> current() const;

  /// Thread-safe: reads the files again. On failure the old pair stays and
  /// the error is returned ("" on success).
  std::string reload();

  const std::string& cert_file() const noexcept { return cert_file_; }

 private:
  std::shared_ptr<boost::asio::ssl::context> load() const;

  const std::string cert_file_;
  const std::string key_file_;
  mutable std::mutex mutex_;
  std::shared_ptr<boost::asio::ssl::context> current_;
};

}  // namespace harnessd::server
