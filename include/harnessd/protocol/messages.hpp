// Typed params and results of each method (docs/protocol.md §4), with their
// JSON forms as Boost.JSON conversions: `json::value_to<PromptParams>(v)`
// validates, `json::value_from(result)` writes the wire form. Reading params
// throws rpc::RpcError(invalid_params) with a message naming the offending
// field; the daemon answers that as -32602 in one place (its method table).
#pragma once

#include "harnessd/protocol/session_id.hpp"
#include "harnessd/protocol/turn_end.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace harnessd::protocol {

struct InitializeParams {
  std::optional<std::string> cwd;
  std::optional<std::string> provider;
  std::optional<std::string> model;
  std::optional<std::int64_t> max_tokens;
  std::optional<std::int64_t> protocol_version;
  std::optional<std::string> auth_token;
};

struct InitializeResult {
  std::string server_name;
  std::string version;
  std::string implementation;
  int protocol_version = 0;
  std::vector<std::string> providers;
  std::vector<std::string> methods;
};

struct PromptParams {
  std::string session_id;
  boost::json::array content_blocks;  ///< each {"type":"text","text":STRING}
};

/// The turn's outcome.
struct PromptResult {
  TurnStatus status = TurnStatus::ok;
  TurnEndReason reason;
};

struct CancelParams {
  std::string session_id;
};

struct CancelResult {
  bool cancelled = false;
};

struct ShutdownParams {};
struct ShutdownResult {};

InitializeParams tag_invoke(boost::json::value_to_tag<InitializeParams>, const boost::json::value& params);
PromptParams tag_invoke(boost::json::value_to_tag<PromptParams>, const boost::json::value& params);
CancelParams tag_invoke(boost::json::value_to_tag<CancelParams>, const boost::json::value& params);
ShutdownParams tag_invoke(boost::json::value_to_tag<ShutdownParams>, const boost::json::value& params);

void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const InitializeResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const PromptResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const CancelResult& result);
void tag_invoke(boost::json::value_from_tag, boost::json::value& out, const ShutdownResult& result);

}  // namespace harnessd::protocol
