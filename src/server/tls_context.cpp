#include "server/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <stdexcept>

namespace harnessd::server {
namespace ssl = boost::asio::ssl;

namespace {

/// The first error of OpenSSL's queue, in words.
std::string openssl_error() {
  const unsigned long code = ::ERR_get_error();
  ::ERR_clear_error();
  if (code == 0) return "unknown error";
  char text[256];
  ::ERR_error_string_n(code, text, sizeof text);
  return text;
}

/// ALPN: a client that offers http/1.1 gets it (browsers over wss); one that
/// offers only other protocols gets none rather than a failed handshake.
int select_alpn(SSL*, const unsigned char** out, unsigned char* out_length, const unsigned char* in,
                unsigned int in_length, void*) {
  static const unsigned char http11[] = "\x08http/1.1";
  unsigned char* selected = nullptr;
  if (::SSL_select_next_proto(&selected, out_length, http11, sizeof http11 - 1, in, in_length) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

TlsContext::TlsContext(std::string cert_file, std::string key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)), current_(load()) {}

std::shared_ptr<ssl::context> TlsContext::load() const {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = context->native_handle();
  ::SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  ::SSL_CTX_set_options(native, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  ::SSL_CTX_set_alpn_select_cb(native, select_alpn, nullptr);
  ::ERR_clear_error();
  if (::SSL_CTX_use_certificate_chain_file(native, cert_file_.c_str()) != 1) {
    throw std::runtime_error("--tls-cert " + cert_file_ + ": " + openssl_error());
  }
  if (::SSL_CTX_use_PrivateKey_file(native, key_file_.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(::ERR_peek_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ::ERR_clear_error();
      throw std::runtime_error("--tls-key " + key_file_ + " does not match --tls-cert " + cert_file_);
    }
    throw std::runtime_error("--tls-key " + key_file_ + ": " + openssl_error());
  }
  if (::SSL_CTX_check_private_key(native) != 1) {
    throw std::runtime_error("--tls-key " + key_file_ + " does not match --tls-cert " + cert_file_ + ": " +
                             openssl_error());
  }
  return context;
}

std::shared_ptr<ssl::context> TlsContext::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

std::string TlsContext::reload() {
  try {
    std::shared_ptr<ssl::context> fresh = load();
    std::lock_guard lock(mutex_);
    current_ = std::move(fresh);
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace harnessd::server
