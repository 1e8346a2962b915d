// Names and versions the daemon reports on the wire and in --version.
#pragma once

namespace harnessd::util {

/// Wire-stable: clients of the DeepSeek Harness SDK protocol check it.
inline constexpr const char* server_name = "deepseek-harness-sdk-runtime";
inline constexpr const char* version = "0.1.0";
inline constexpr int protocol_version = 1;

}  // namespace harnessd::util
