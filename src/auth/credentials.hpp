// Who a network client is. A daemon runs with no authentication (every
// client is the anonymous administrator: loopback and stdio use), with one
// bearer token (--auth-token-file: one administrator), or with a table of
// principals (--auth-file), each owning its own namespace of sessions.
// Tokens are kept only as SHA-256 digests and compared in constant time.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::auth {

/// An authenticated identity. An administrator sees every session; any other
/// principal sees only the sessions it created, under the ids it gave them.
struct Principal {
  std::string name;
  bool admin = false;

  /// The store's id of the session this principal calls `wire_id`. An
  /// administrator names sessions by their store ids; a principal's own
  /// sessions live under "@NAME/".
  std::string store_id(std::string_view wire_id) const;

  /// The id this principal knows `store_id` by, or nullopt when the session
  /// belongs to someone else.
  std::optional<std::string_view> wire_id(std::string_view store_id) const;
};

/// The id a session's owner knows it by: `store_id` without its "@NAME/"
/// namespace. Notifications name sessions this way.
std::string_view owner_view(std::string_view store_id);

/// How notifications name a session: as its owner does when sessions are
/// split into namespaces, else by its id.
inline std::string_view notified_id(bool namespaced, std::string_view store_id) {
  return namespaced ? owner_view(store_id) : store_id;
}

using Digest = std::array<unsigned char, 32>;

/// SHA-256 of `data`.
Digest sha256(std::string_view data);

class Credentials {
 public:
  /// No authentication: every client is the anonymous administrator.
  Credentials() = default;

  /// One token, one administrator (--auth-token-file).
  static Credentials single_token(std::string_view token);

  /// The principals of a TOML file (--auth-file):
  ///   [principals.NAME]
  ///   token = "sha256:HEX"   # lower-case hex SHA-256 of the token
  ///   admin = true           # optional
  /// Throws std::runtime_error naming the file and the problem.
  static Credentials from_file(const std::string& path);

  /// Whether network clients must present a token.
  bool required() const noexcept { return !entries_.empty(); }

  /// Whether sessions are split into per-principal namespaces.
  bool namespaced() const noexcept { return namespaced_; }

  /// The principal that `token` belongs to, or nullptr. Takes the same time
  /// whatever the token's content or length.
  const Principal* authenticate(std::string_view token) const;

  /// The identity of clients of a daemon without authentication, and of the
  /// stdio client (the local process that owns the daemon).
  static const Principal& anonymous();

  std::size_t size() const noexcept { return entries_.size(); }

 private:
  struct Entry {
    Digest digest;
    Principal principal;
  };
  std::vector<Entry> entries_;
  bool namespaced_ = false;
};

}  // namespace harnessd::auth
