// Fuzzes the --listen parser (util::Url on Boost.URL): bad values must be
// refused with std::invalid_argument (a message for the operator), never
// another error, and an accepted address must survive being printed and
// parsed again, as it is when the daemon reports the address it listens on.
#include "fuzz_check.hpp"

#include "util/listen_url.hpp"

#include <stdexcept>

namespace util = harnessd::util;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  util::Url url;
  try {
    url = util::parse_listen_url(harnessd::fuzz::as_view(bytes, size));
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(std::string_view(e.what()).starts_with("listen address"));
    return 0;
  }
  FUZZ_CHECK(url.scheme == "tcp" || url.scheme == "ws" || url.scheme == "tls" || url.scheme == "wss");
  FUZZ_CHECK(!url.host.empty());
  FUZZ_CHECK(url.host.find_first_of("[]/?#@") == std::string::npos);
  FUZZ_CHECK(url.path.empty() || url.path == "/");
  FUZZ_CHECK(url.query.empty());
  const util::Url again = util::parse_listen_url(url.to_string());
  FUZZ_CHECK(again.scheme == url.scheme && again.host == url.host && again.port == url.port && again.path == url.path);
  const std::string reported = util::format_listen_url(url.scheme, url.host, url.port);
  const util::Url bound = util::parse_listen_url(reported);
  FUZZ_CHECK(bound.scheme == url.scheme && bound.host == url.host && bound.port == url.port && bound.path.empty());
  return 0;
}
