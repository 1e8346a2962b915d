// A `[providers.NAME]` table of the config file: an OpenAI-compatible
// endpoint offered to clients as provider NAME (docs/protocol.md §13.3).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace harnessd::llm {

struct ProviderProfile {
  std::string name;
  std::string kind = "openai";  ///< the wire format; "openai" is the only one
  std::string base_url;         ///< e.g. http://127.0.0.1:8000/v1 (POST {base_url}/chat/completions)
  std::string api_key_env;      ///< the variable holding the key; empty for a server without one
  std::string default_model;    ///< for clients that name no model
  std::map<std::string, std::int64_t, std::less<>> context_windows;  ///< `models = { NAME = { context_window = N } }`
  std::string where;            ///< "FILE line N", for start-up errors
};

}  // namespace harnessd::llm
