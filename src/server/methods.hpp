// The method table: for each protocol method, the gates a request passes,
// the typed params it is read into, the handler, and its typed result.
// Invalid params become -32602 here, in one place (the params' value_to);
// the connection applies the gates and answers.
#pragma once

#include "harnessd/protocol/methods.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include <span>
#include <string>
#include <string_view>

namespace harnessd::server {

struct ClientState;

struct MethodSpec {
  protocol::Method method;
  /// The one method an unauthenticated client may call, carrying the token.
  bool authenticates = false;
  /// -32002 before a successful initialize on the connection.
  bool requires_initialize = false;
  /// Answered only after every other request of the connection, accepted
  /// while shutting down, and the connection's last answer (shutdown).
  bool answers_last = false;
  /// Reads the params, runs the handler, returns the result serialized.
  /// Throws rpc::RpcError for a protocol error.
  boost::asio::awaitable<std::string> (*invoke)(ClientState& client, const boost::json::value& params);

  std::string_view name() const { return protocol::name_of(method); }
};

/// Every method the daemon serves, in protocol::Method order.
std::span<const MethodSpec> method_table();

/// nullptr for a method the daemon does not serve.
const MethodSpec* find_method(std::string_view name);

}  // namespace harnessd::server
