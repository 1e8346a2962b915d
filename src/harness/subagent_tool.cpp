// The subagent tool. A child session shares its parent's strand: the child
// turn runs inside the parent's, so cancelling the parent reaches the child
// synchronously and the whole tree is race-free by construction.
#include "harness/subagent_tool.hpp"

#include "detail/turn.hpp"

#include "harness/session_registry.hpp"
#include "harnessd/protocol/turn_end.hpp"
#include "llm/provider.hpp"
#include "util/json_limits.hpp"

#include <boost/json/parse.hpp>

namespace harnessd::harness::detail {
namespace asio = boost::asio;
namespace json = boost::json;

asio::awaitable<tools::ToolResult> run_subagent(Session& parent, std::string prompt, const PromptInput& parent_input,
                                                EventSink& sink, llm::CancelScope& cancel) {
  const int max_depth = parent.registry().options().max_delegation_depth;
  if (parent.delegation_depth() >= max_depth) {
    co_return tools::ToolResult::failure(
        "DEPTH_LIMIT", "subagent: delegation depth limit (" + std::to_string(max_depth) + ") reached");
  }

  std::shared_ptr<Session> child = parent.registry().create_child(parent);
  protocol::SubagentStarted started{parent.id(), child->id()};
  co_await sink.on_subagent_started(std::move(started));

  PromptInput input;
  input.content = json::array{json::object{{"type", "text"}, {"text", std::move(prompt)}}};
  input.provider = parent_input.provider;
  input.model = parent_input.model;
  input.max_tokens = parent_input.max_tokens;
  input.cwd = parent.workspace();  // children work in their parent's workspace
  input.sandbox = parent_input.sandbox;
  input.owner = parent_input.owner;  // the parent's client gets the child's events from the sink
  input.run_detached = parent_input.run_detached;
  input.approval_policy = parent_input.approval_policy;
  input.context_window = parent_input.context_window;
  input.settings = parent_input.settings;
  input.instructions_root = parent_input.instructions_root;
  input.max_steps = parent_input.max_steps;  // the child's own calls ask as the parent's would

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

  if (ok) {
    tools::ToolResult result;
    result.text = outcome.final_text.value_or("");
    result.meta = json::object{{"childSessionId", child->id()}};
    co_return result;
  }
  std::string why(protocol::to_string(outcome.reason.kind));
  if (outcome.reason.kind == protocol::TurnEndReason::Kind::error) {
    why += ": ";
    why += outcome.reason.message;
  }
  co_return tools::ToolResult::failure("SUBAGENT_FAILED", "subagent did not finish (" + why + ")");
}

}  // namespace harnessd::harness::detail

namespace harnessd::harness {
namespace asio = boost::asio;
namespace json = boost::json;
namespace {

class SubagentTool final : public tools::Tool {
 public:
  std::string_view name() const override { return "subagent"; }
  std::string_view description() const override {
    return "Delegate a self-contained task to a subagent that works in its own session, in the same "
           "workspace, and returns its final answer. Give it everything it needs in the prompt: it does "
           "not see this conversation. Use it for independent side tasks whose details would crowd this "
           "conversation.";
  }
  const json::object& input_schema() const override {
    static const json::object schema{
        {"type", "object"},
        {"properties",
         json::object{{"description", json::object{{"type", "string"}, {"description", "A short title for the task"}}},
                      {"prompt", json::object{{"type", "string"}, {"description", "The full task for the subagent"}}}}},
        {"required", json::array{"description", "prompt"}}};
    return schema;
  }
  std::string_view guidance() const override {
    return "Delegate a self-contained task (a search across many files, an independent change) to a subagent when "
           "its details would crowd your context; its final answer comes back as the result.";
  }
  bool read_only() const override { return false; }
  bool asks_approval() const override { return false; }
  bool delegates() const override { return true; }

  asio::awaitable<tools::ToolResult> run(const json::object& args, tools::ToolContext& context) override {
    const json::value* prompt = args.if_contains("prompt");
    const json::value* description = args.if_contains("description");
    if (!prompt->is_string() || prompt->get_string().empty()) {
      co_return tools::ToolResult::failure("INVALID_ARGUMENTS", "subagent: \"prompt\" must be a non-empty string");
    }
    if (!context.delegate) {
      co_return tools::ToolResult::failure("DEPTH_LIMIT", "subagent: delegation is not available at this depth");
    }
    std::string title = description->is_string() ? std::string(description->get_string()) : std::string();
    std::string task(prompt->get_string());
    tools::ToolResult result = co_await context.delegate(std::move(title), std::move(task));
    co_return result;
  }
};

}  // namespace

std::unique_ptr<tools::Tool> make_subagent_tool() { return std::make_unique<SubagentTool>(); }

}  // namespace harnessd::harness
