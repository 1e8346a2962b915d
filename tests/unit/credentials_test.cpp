// Principals, their token digests and their session namespaces; the HTTP
// sniffer of NDJSON listeners.
#include "auth/credentials.hpp"
#include "transport/http_sniff.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace harnessd;

namespace {

std::string hex(const auth::Digest& digest) {
  std::string out;
  char byte[3];
  for (const unsigned char b : digest) {
    std::snprintf(byte, sizeof byte, "%02x", b);
    out += byte;
  }
  return out;
}

/// Writes `text` to a fresh file and returns its path.
std::string write_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("harnessd-credentials-" + name + ".toml");
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST_CASE("sha256 matches the standard test vector") {
  CHECK(hex(auth::sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("an auth file maps tokens to principals") {
  const std::string path = write_file("ok", "[principals.alice]\ntoken = \"sha256:" + hex(auth::sha256("a-token")) +
                                                "\"\n[principals.root]\ntoken = \"sha256:" +
                                                hex(auth::sha256("r-token")) + "\"\nadmin = true\n");
  const auth::Credentials credentials = auth::Credentials::from_file(path);
  CHECK(credentials.required());
  CHECK(credentials.namespaced());
  const auth::Principal* alice = credentials.authenticate("a-token");
  REQUIRE(alice != nullptr);
  CHECK(alice->name == "alice");
  CHECK_FALSE(alice->admin);
  const auth::Principal* root = credentials.authenticate("r-token");
  REQUIRE(root != nullptr);
  CHECK(root->admin);
  CHECK(credentials.authenticate("a-toke") == nullptr);
  CHECK(credentials.authenticate("") == nullptr);
  CHECK(credentials.authenticate("sha256:" + hex(auth::sha256("a-token"))) == nullptr);
}

TEST_CASE("a broken auth file is refused with the principal it is about") {
  const auto refused = [](const std::string& name, const std::string& text) -> std::string {
    try {
      (void)auth::Credentials::from_file(write_file(name, text));
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  const std::string digest = hex(auth::sha256("t"));
  CHECK(refused("empty", "").find("no [principals.NAME]") != std::string::npos);
  CHECK(refused("plain", "[principals.bob]\ntoken = \"t\"\n").find("principals.bob.token") != std::string::npos);
  CHECK(refused("upper", "[principals.bob]\ntoken = \"sha256:" + std::string(64, 'A') + "\"\n")
            .find("lower-case") != std::string::npos);
  CHECK(refused("name", "[principals.\"a/b\"]\ntoken = \"sha256:" + digest + "\"\n").find("name") !=
        std::string::npos);
  CHECK(refused("twice", "[principals.a]\ntoken = \"sha256:" + digest + "\"\n[principals.b]\ntoken = \"sha256:" +
                             digest + "\"\n")
            .find("same token") != std::string::npos);
  CHECK(refused("admin", "[principals.a]\ntoken = \"sha256:" + digest + "\"\nadmin = \"yes\"\n")
            .find("admin") != std::string::npos);
  CHECK(refused("syntax", "[principals.a\n").find("--auth-file") != std::string::npos);
}

TEST_CASE("a principal reaches only its own namespace; an admin reaches every session") {
  const auth::Principal alice{"alice", false};
  const auth::Principal root{"root", true};
  CHECK(alice.store_id("demo") == "@alice/demo");
  CHECK(alice.wire_id("@alice/demo") == "demo");
  CHECK(alice.wire_id("@alice/@bob/x") == "@bob/x");
  CHECK_FALSE(alice.wire_id("@bob/demo"));
  CHECK_FALSE(alice.wire_id("demo"));
  CHECK_FALSE(alice.wire_id("@alicex/demo"));
  CHECK_FALSE(alice.wire_id("@alice"));
  // Her own "@bob/x" stays hers: no id of hers reaches another namespace.
  CHECK(alice.store_id("@bob/x") == "@alice/@bob/x");
  CHECK(root.store_id("@alice/demo") == "@alice/demo");
  CHECK(root.wire_id("@alice/demo") == "@alice/demo");
  CHECK(auth::owner_view("@alice/demo") == "demo");
  CHECK(auth::owner_view("demo") == "demo");
  CHECK(auth::owner_view("@not a name/x") == "@not a name/x");
}

TEST_CASE("single token: one administrator") {
  const auth::Credentials credentials = auth::Credentials::single_token("secret");
  CHECK(credentials.required());
  CHECK_FALSE(credentials.namespaced());
  REQUIRE(credentials.authenticate("secret") != nullptr);
  CHECK(credentials.authenticate("secret")->admin);
  CHECK(credentials.authenticate("secret ") == nullptr);
  CHECK_FALSE(auth::Credentials().required());
}

TEST_CASE("HTTP request lines and Host headers are recognised on NDJSON listeners") {
  CHECK(transport::looks_like_http("POST / HTTP/1.1"));
  CHECK(transport::looks_like_http("GET /x HTTP/1.0"));
  CHECK(transport::looks_like_http("OPTIONS * HTTP/1.1"));
  CHECK(transport::looks_like_http("CONNECT a:1 HTTP/1.1"));
  CHECK(transport::looks_like_http("HOST: evil.example"));
  CHECK(transport::looks_like_http("host:x"));
  CHECK_FALSE(transport::looks_like_http(R"({"jsonrpc":"2.0","id":1,"method":"initialize"})"));
  CHECK_FALSE(transport::looks_like_http("GET"));
  CHECK_FALSE(transport::looks_like_http(""));
  CHECK_FALSE(transport::looks_like_http("hostname"));
}
