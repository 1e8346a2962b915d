#include "harnessd/client/errors.hpp"

#include "harnessd/util/enum_error_category.hpp"

namespace harnessd::client {

namespace {

std::string_view describe(errc value) noexcept {
  switch (value) {
    case errc::protocol_error:
      return "the daemon's answer breaks the protocol";
    case errc::transport_closed:
      return "the connection to the daemon ended";
    case errc::certificate_untrusted:
      return "the daemon's TLS certificate was not trusted";
  }
  return {};
}

}  // namespace

const std::error_category& client_category() noexcept {
  static const util::EnumErrorCategory<errc> category("harnessd.client", describe);
  return category;
}

}  // namespace harnessd::client
