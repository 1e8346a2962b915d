// The subagent tool. A child session shares its parent's strand: the child
// turn runs inside the parent's, so cancelling the parent reaches the child
// synchronously and the whole tree is race-free by construction.
#include "detail/turn.hpp"

#include "harness/session_registry.hpp"
#include "harnessd/protocol/turn_end.hpp"
#include "llm/provider.hpp"
#include "util/json_limits.hpp"

#include <boost/json/parse.hpp>

namespace harnessd::harness::detail {
namespace asio = boost::asio;
namespace json = boost::json;

asio::awaitable<ToolOutcome> run_subagent(Session& parent, const llm::ToolCall& call,
                                          const PromptInput& parent_input, EventSink& sink,
                                          llm::CancelScope& cancel) {
  json::error_code ec;
  json::value args = json::parse(call.arguments, ec, {}, util::input_parse_options());
  const json::value* prompt = (!ec && args.is_object()) ? args.get_object().if_contains("prompt") : nullptr;
  if (prompt == nullptr || !prompt->is_string() || prompt->get_string().empty()) {
    co_return ToolOutcome{"subagent: arguments must be a JSON object with a non-empty string \"prompt\"", true};
  }
  const int max_depth = parent.registry().options().max_delegation_depth;
  if (parent.delegation_depth() >= max_depth) {
    co_return ToolOutcome{"subagent: delegation depth limit (" + std::to_string(max_depth) + ") reached", true};
  }

  std::shared_ptr<Session> child = parent.registry().create_child(parent);
  protocol::SubagentStarted started{parent.id(), child->id()};
  co_await sink.on_subagent_started(std::move(started));

  PromptInput input;
  input.content = json::array{json::object{{"type", "text"}, {"text", prompt->get_string()}}};
  input.provider = parent_input.provider;
  input.model = parent_input.model;
  input.max_tokens = parent_input.max_tokens;
  input.cwd = parent_input.cwd;
  input.owner = parent_input.owner;  // the parent's client gets the child's events from the sink
  input.run_detached = parent_input.run_detached;

  PromptOutcome outcome;
  if (cancel.cancelled()) {
    outcome.reason = protocol::TurnEndReason::aborted(cancel.reason());
  } else {
    llm::CancelScope::Hook forward(cancel, [child, &cancel] { child->cancel(cancel.reason()); });
    child->try_reserve();  // a fresh child: nobody else can hold it
    outcome = co_await child->prompt(std::move(input), sink);
  }

  const bool ok = protocol::status_for(outcome.reason, parent.registry().options().max_tokens_as_success) ==
                  protocol::TurnStatus::ok;
  protocol::SubagentFinished finished{.provider = std::string(parent_input.provider->name()),
                                      .child_session_id = child->id(),
                                      .parent_session_id = parent.id(),
                                      .ok = ok,
                                      .stop_reason = outcome.reason.kind,
                                      .last_assistant_message = outcome.final_text};
  co_await sink.on_subagent_finished(std::move(finished));

  if (ok) co_return ToolOutcome{outcome.final_text.value_or(""), false};
  std::string why(protocol::to_string(outcome.reason.kind));
  if (outcome.reason.kind == protocol::TurnEndReason::Kind::error) {
    why += ": ";
    why += outcome.reason.message;
  }
  co_return ToolOutcome{"subagent did not finish (" + why + ")", true};
}

}  // namespace harnessd::harness::detail
