// Typed, validated params of each method (protocol §4). Parsers throw
// RpcError(invalid_params) with a message naming the offending field.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace harnessd::rpc {

inline constexpr std::size_t max_session_id_bytes = 256;

struct InitializeParams {
  std::optional<std::string> cwd;
  std::optional<std::string> provider;
  std::optional<std::string> model;
  std::optional<std::int64_t> max_tokens;
  std::optional<std::int64_t> protocol_version;
  std::optional<std::string> auth_token;
};

struct PromptParams {
  std::string session_id;
  boost::json::array content_blocks;  ///< each {"type":"text","text":STRING}
};

struct SessionIdParams {
  std::string session_id;
};

InitializeParams parse_initialize_params(const boost::json::value& params);
PromptParams parse_prompt_params(const boost::json::value& params);
SessionIdParams parse_session_id_params(const boost::json::value& params);

}  // namespace harnessd::rpc
