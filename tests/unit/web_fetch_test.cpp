// web_fetch's pure parts: which addresses a fetch may reach, and a page's text.
#include "tools/web_fetch.hpp"

#include <doctest/doctest.h>

using harnessd::tools::html_to_text;
using harnessd::tools::is_public_address;
namespace ip = boost::asio::ip;

TEST_CASE("web_fetch reaches only public addresses") {
  for (const char* blocked : {"127.0.0.1", "127.8.9.10", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
                              "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1",
                              "::", "fe80::1", "fc00::1", "fd00:ec2::254", "::ffff:127.0.0.1", "::ffff:10.0.0.1",
                              "::127.0.0.1", "64:ff9b::a00:1", "2001:db8::1"}) {
    CAPTURE(blocked);
    CHECK_FALSE(is_public_address(ip::make_address(blocked)));
  }
  for (const char* open : {"1.1.1.1", "8.8.8.8", "172.32.0.1", "192.169.0.1", "2606:4700:4700::1111",
                           "::ffff:1.1.1.1"}) {
    CAPTURE(open);
    CHECK(is_public_address(ip::make_address(open)));
  }
}

TEST_CASE("a page's text: no scripts, styles or tags; entities decoded") {
  const std::string text = html_to_text(
      "<html><head><style>p{x:y}</style><script>alert('x<p>')</script></head>"
      "<body><h1>Title</h1><p>a &amp; b &lt;c&gt;</p><div>  two   spaces</div><SCRIPT>no</SCRIPT></body></html>");
  CHECK(text.find("alert") == std::string::npos);
  CHECK(text.find("x:y") == std::string::npos);
  CHECK(text.find("no") == std::string::npos);
  CHECK(text.find("Title") != std::string::npos);
  CHECK(text.find("a & b <c>") != std::string::npos);
  CHECK(text.find("two spaces") != std::string::npos);
  CHECK(text.find('<') == text.find("<c>"));
  CHECK(html_to_text("\xff<b>x</b>") == "\xef\xbf\xbdx");
  CHECK(html_to_text("<script>unterminated") == "");
}
