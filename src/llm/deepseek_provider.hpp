// OpenAI-compatible chat completions streamed over HTTPS (or plain HTTP for
// local servers): the built-in `deepseek` provider, and each
// `[providers.NAME]` profile of kind "openai" (vLLM, llama.cpp's server,
// Ollama, ...). Beast stays inside its .cpp.
#pragma once

#include "llm/provider.hpp"
#include "llm/sse_parser.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace harnessd::llm {

struct DeepSeekConfig {
  std::string name = "deepseek";                    ///< the provider's name in initialize
  std::string api_key;                              ///< never logged; empty sends no Authorization
  std::string base_url = "https://api.deepseek.com";
  std::string default_model = "deepseek-chat";
  /// Context windows by model, ahead of the catalog's.
  std::map<std::string, std::int64_t, std::less<>> context_windows;
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds first_byte_timeout{60'000};
  std::chrono::milliseconds idle_timeout{60'000};   ///< longest silence inside a stream
  int max_attempts = 3;                             ///< for 429/5xx before any byte streamed
  std::chrono::milliseconds retry_base_delay{500};  ///< doubled per attempt
  /// After [DONE], how long the end of the HTTP body may take.
  std::chrono::milliseconds body_end_timeout{2'000};
  std::size_t max_idle_connections = 16;
  /// Input bounds against a runaway endpoint; exceeding one ends the call
  /// with error code STREAM_TOO_LARGE.
  std::size_t max_sse_line_bytes = SseParser::default_max_line_bytes;    ///< 1 MiB
  std::size_t max_sse_event_bytes = SseParser::default_max_event_bytes;  ///< 4 MiB
  /// Bytes Beast may buffer below the SSE parser (headers, chunk-size lines).
  std::size_t max_http_buffer_bytes = std::size_t{1} << 20;              ///< 1 MiB
  /// A non-200 body is read only this far, for its error message.
  std::size_t max_error_body_bytes = 64 * 1024;
};

/// Reads DEEPSEEK_API_KEY and DEEPSEEK_BASE_URL; nullopt-like empty key when unset.
DeepSeekConfig deepseek_config_from_env();

class DeepSeekProvider final : public Provider {
 public:
  /// Throws std::invalid_argument for a base URL it cannot use.
  DeepSeekProvider(boost::asio::any_io_executor executor, DeepSeekConfig config);
  ~DeepSeekProvider() override;

  std::string_view name() const override { return config_.name; }
  std::string default_model() const override { return config_.default_model; }
  std::optional<std::int64_t> context_window(std::string_view model) const override;
  boost::asio::awaitable<ModelResult> stream(const ModelRequest& request, ChunkSink& sink,
                                             CancelScope& cancel) override;

 private:
  struct Impl;
  DeepSeekConfig config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace harnessd::llm
