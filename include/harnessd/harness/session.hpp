// One agent session: its durable log, its conversation, and the strand that
// serialises everything about it. At most one turn runs at a time.
#pragma once

#include "harnessd/harness/event_sink.hpp"
#include "harnessd/llm/cancel_scope.hpp"
#include "harnessd/llm/chat.hpp"
#include "harnessd/store/event_store.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/strand.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace harnessd::llm {
class Provider;
}

namespace harnessd::harness {

class SessionRegistry;

/// What a prompt asks for; the connection's initialize choices included.
struct PromptInput {
  boost::json::array content;  ///< validated content blocks
  llm::Provider* provider = nullptr;
  std::string model;
  std::optional<std::int64_t> max_tokens;
  std::optional<std::string> cwd;  ///< recorded in the header of a new session
  const void* owner = nullptr;     ///< who prompted: cancel(why, owner) matches it
};

struct PromptOutcome {
  bool busy = false;                  ///< rejected: another prompt is running
  boost::json::object reason;         ///< TurnEndReason of the settled turn
  std::optional<std::string> final_text;  ///< text of the last assistant/message
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Strand = boost::asio::strand<boost::asio::any_io_executor>;

  Session(Strand strand, std::string id, SessionRegistry& registry,
          std::optional<std::string> parent_id, int delegation_depth);

  const std::string& id() const noexcept { return id_; }
  const Strand& strand() const noexcept { return strand_; }
  /// Strand-only once the session may be loading.
  int delegation_depth() const noexcept { return delegation_depth_; }

  /// Runs one turn to settlement, or answers busy at once. Must run on
  /// strand(). Throws on store failure (the turn then has no turn/end).
  boost::asio::awaitable<PromptOutcome> prompt(PromptInput input, EventSink& sink);

  /// Cancels the running turn, if any (only if prompted by `owner`, when
  /// given). Must run on strand(). Returns whether a turn was cancelled.
  bool cancel(const std::string& why, const void* owner = nullptr);

  /// cancel() from any executor: hops to the session's strand and back.
  static boost::asio::awaitable<bool> cancel_from_anywhere(std::shared_ptr<Session> session,
                                                           std::string why, const void* owner);

  // --- used by the turn loop, on strand() ---
  /// Stamps seq and time on an event, appends it to the log, updates the
  /// conversation and returns the serialized event.
  std::string append_event(std::string_view type, boost::json::object data);
  /// The same for an event whose data is already serialized and does not
  /// change the conversation (chunks, step boundaries): the hot path.
  std::string append_serialized_event(std::string_view type, std::string_view data_json);
  const std::vector<llm::ChatMessage>& messages() const noexcept { return messages_; }
  void sync_log();
  std::int64_t allocate_turn() noexcept { return next_turn_++; }
  SessionRegistry& registry() noexcept { return registry_; }

 private:
  void load(const std::optional<std::string>& cwd);
  void apply_to_conversation(std::string_view type, const boost::json::object& data);

  Strand strand_;
  const std::string id_;
  SessionRegistry& registry_;
  const std::optional<std::string> parent_id_;
  int delegation_depth_;  ///< from the stored header once loaded

  // Strand-only state.
  std::unique_ptr<store::SessionLog> log_;
  std::uint64_t next_seq_ = 0;
  std::int64_t next_turn_ = 0;
  std::vector<llm::ChatMessage> messages_;
  bool busy_ = false;
  llm::CancelScope* running_ = nullptr;  ///< the running turn's scope
  const void* running_owner_ = nullptr;
};

}  // namespace harnessd::harness
