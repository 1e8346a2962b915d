// A model backend. A provider streams one model call as protocol chunks
// (docs/protocol.md §6, assistant/chunk) and reports how it finished.
#pragma once

#include "llm/cancel_scope.hpp"
#include "llm/chat.hpp"
#include "harnessd/protocol/chunk.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <map>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::llm {

/// Receives every chunk of a model call, in order. Chunks may be held back
/// briefly so that many share one log write and one socket write: a provider
/// calls flush() before it waits for anything (the network, a timer), so no
/// chunk sits in the sink while the model is silent.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  /// Awaiting it is the provider's backpressure.
  virtual boost::asio::awaitable<void> on_chunk(protocol::Chunk chunk) = 0;
  /// Logs and queues every chunk received so far.
  virtual boost::asio::awaitable<void> flush() = 0;
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string_view name() const = 0;
  virtual std::string default_model() const = 0;
  /// The context window its configuration gives `model` (a profile's
  /// `models` table), or nullopt.
  virtual std::optional<std::int64_t> context_window(std::string_view model) const = 0;

  /// Runs one model call on the calling coroutine's executor (the session
  /// strand). Must return promptly with FinishReason::cancelled once
  /// `cancel` fires. Expected failures come back in ModelResult.
  virtual boost::asio::awaitable<ModelResult> stream(const ModelRequest& request,
                                                     ChunkSink& sink,
                                                     CancelScope& cancel) = 0;
};

/// Providers by name. Filled at start-up, read-only afterwards.
class ProviderRegistry {
 public:
  void add(std::shared_ptr<Provider> provider);
  Provider* find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, std::shared_ptr<Provider>, std::less<>> providers_;
};

}  // namespace harnessd::llm
