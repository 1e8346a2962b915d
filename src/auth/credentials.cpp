#include "auth/credentials.hpp"

#include <openssl/evp.h>
#include <toml++/toml.h>

#include <stdexcept>

namespace harnessd::auth {

namespace {

constexpr std::string_view digest_prefix = "sha256:";
constexpr std::size_t max_principal_name = 64;

bool valid_principal_name(std::string_view name) {
  if (name.empty() || name.size() > max_principal_name) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::optional<Digest> parse_hex_digest(std::string_view hex) {
  Digest digest{};
  if (hex.size() != digest.size() * 2) return std::nullopt;
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;  // lower-case only: one spelling per digest
  };
  for (std::size_t i = 0; i < digest.size(); ++i) {
    const int hi = nibble(hex[2 * i]);
    const int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    digest[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return digest;
}

/// Constant-time equality of two digests.
bool same_digest(const Digest& a, const Digest& b) {
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string Principal::store_id(std::string_view wire_id) const {
  if (admin) return std::string(wire_id);
  std::string id;
  id.reserve(name.size() + 2 + wire_id.size());
  id += '@';
  id += name;
  id += '/';
  id += wire_id;
  return id;
}

std::optional<std::string_view> Principal::wire_id(std::string_view store_id) const {
  if (admin) return store_id;
  if (store_id.size() < name.size() + 2 || store_id[0] != '@' || store_id.substr(1, name.size()) != name ||
      store_id[name.size() + 1] != '/') {
    return std::nullopt;
  }
  return store_id.substr(name.size() + 2);
}

std::string_view owner_view(std::string_view store_id) {
  if (store_id.empty() || store_id[0] != '@') return store_id;
  const std::size_t slash = store_id.find('/');
  if (slash == std::string_view::npos || !valid_principal_name(store_id.substr(1, slash - 1))) return store_id;
  return store_id.substr(slash + 1);
}

Digest sha256(std::string_view data) {
  Digest digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    throw std::runtime_error("SHA-256 failed");
  }
  return digest;
}

Credentials Credentials::single_token(std::string_view token) {
  Credentials credentials;
  credentials.entries_.push_back(Entry{sha256(token), Principal{"token", true}});
  return credentials;
}

Credentials Credentials::from_file(const std::string& path) {
  toml::table file;
  try {
    file = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw std::runtime_error("--auth-file " + path + ": " + std::string(e.description()));
  }
  const toml::table* principals = file["principals"].as_table();
  if (principals == nullptr || principals->empty()) {
    throw std::runtime_error("--auth-file " + path + ": no [principals.NAME] tables");
  }
  Credentials credentials;
  credentials.namespaced_ = true;
  for (const auto& [key, node] : *principals) {
    const std::string name(key.str());
    const std::string where = "--auth-file " + path + ": principals." + name;
    if (!valid_principal_name(name)) {
      throw std::runtime_error(where + ": a principal's name is 1-64 of A-Z a-z 0-9 _ - .");
    }
    const toml::table* table = node.as_table();
    if (table == nullptr) throw std::runtime_error(where + " is not a table");
    const std::optional<std::string> token = (*table)["token"].value<std::string>();
    if (!token || !token->starts_with(digest_prefix)) {
      throw std::runtime_error(where + ".token must be \"sha256:HEX\" (printf %s TOKEN | sha256sum)");
    }
    const std::optional<Digest> digest = parse_hex_digest(std::string_view(*token).substr(digest_prefix.size()));
    if (!digest) throw std::runtime_error(where + ".token: 64 lower-case hex digits after \"sha256:\"");
    const toml::node_view admin = (*table)["admin"];
    if (admin && !admin.is_boolean()) throw std::runtime_error(where + ".admin must be true or false");
    for (const Entry& other : credentials.entries_) {
      if (same_digest(other.digest, *digest)) {
        throw std::runtime_error(where + " has the same token as principals." + other.principal.name);
      }
    }
    credentials.entries_.push_back(Entry{*digest, Principal{name, admin.value_or(false)}});
  }
  return credentials;
}

const Principal* Credentials::authenticate(std::string_view token) const {
  // The token is hashed first, so the work below depends on neither its
  // length nor its content; every entry is compared.
  const Digest digest = sha256(token);
  const Principal* found = nullptr;
  for (const Entry& entry : entries_) {
    if (same_digest(entry.digest, digest)) found = &entry.principal;
  }
  return found;
}

const Principal& Credentials::anonymous() {
  static const Principal principal{"anonymous", true};
  return principal;
}

}  // namespace harnessd::auth
