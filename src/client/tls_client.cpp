#include "client/tls_client.hpp"

#include "harnessd/client/errors.hpp"

#include <boost/asio/ip/address.hpp>

#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace harnessd::client::detail {
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using boost::system::error_code;

ssl::context make_tls_context(const ConnectOptions& options) {
  ssl::context context(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
  context.set_options(ssl::context::default_workarounds | ssl::context::no_compression);
  if (options.insecure) {
    context.set_verify_mode(ssl::verify_none);
    return context;
  }
  error_code ec;
  if (options.ca_file.empty()) {
    context.set_default_verify_paths(ec);
    if (ec) throw std::invalid_argument("cannot load the system's trusted CAs: " + ec.message());
  } else {
    if (!std::ifstream(options.ca_file)) {
      throw std::invalid_argument("cannot read CA file " + options.ca_file + ": " + std::strerror(errno));
    }
    context.load_verify_file(options.ca_file, ec);
    if (ec) {
      throw std::invalid_argument("CA file " + options.ca_file + " holds no usable PEM certificate: " + ec.message());
    }
  }
  context.set_verify_mode(ssl::verify_peer);
  return context;
}

void prepare_tls_connection(SSL* ssl, const std::string& host, const ConnectOptions& options,
                            std::string_view alpn) {
  error_code not_address;
  asio::ip::make_address(host, not_address);
  const bool is_address = !not_address;
  // SNI carries names only (RFC 6066); an address is checked against the
  // certificate's IP subjectAltNames.
  if (!is_address && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    throw std::invalid_argument("\"" + host + "\" cannot be sent as a TLS server name");
  }
  if (!alpn.empty()) {
    std::string protos(1, static_cast<char>(alpn.size()));
    protos += alpn;
    SSL_set_alpn_protos(ssl, reinterpret_cast<const unsigned char*>(protos.data()),
                        static_cast<unsigned>(protos.size()));
  }
  if (options.insecure) return;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  const int ok = is_address ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                            : X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  if (ok != 1) throw std::invalid_argument("cannot check a TLS certificate for host \"" + host + "\"");
}

void throw_handshake_error(SSL* ssl, const error_code& ec, const std::string& where) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    throw CertificateError("the TLS certificate of " + where + " was not trusted: " +
                               X509_verify_cert_error_string(verify),
                           verify);
  }
  throw ClientError("TLS handshake with " + where + " failed: " + ec.message(), ec);
}

}  // namespace harnessd::client::detail
