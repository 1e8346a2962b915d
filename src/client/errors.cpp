#include "harnessd/client/errors.hpp"

namespace harnessd::client {

namespace {

class ClientCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "harnessd.client"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::protocol_error:
        return "the daemon's answer breaks the protocol";
      case errc::transport_closed:
        return "the connection to the daemon ended";
      case errc::certificate_untrusted:
        return "the daemon's TLS certificate was not trusted";
    }
    return "unknown client error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& client_category() noexcept {
  static const ClientCategory category;
  return category;
}

}  // namespace harnessd::client
