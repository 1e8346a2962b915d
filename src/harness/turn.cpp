#include "detail/turn.hpp"

#include "harness/pending_decisions.hpp"
#include "harness/session_registry.hpp"
#include "harness/system_prompt.hpp"
#include "harness/workspace_instructions.hpp"
#include "harnessd/protocol/events.hpp"
#include "harnessd/protocol/turn_end.hpp"
#include "llm/provider.hpp"
#include "llm/valid_text.hpp"
#include "util/json_append.hpp"
#include "util/json_limits.hpp"
#include "util/utf8.hpp"
#include "util/wakeup.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <exception>
#include <filesystem>
#include <map>

namespace harnessd::harness::detail {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr std::string_view assistant_chunk = "assistant/chunk";

// Events are held back and leave together: one log write, then one push of
// their notifications. A batch goes out when it is this large, before every
// wait of the model (flush()), before a tool runs and at the turn's end.
constexpr std::size_t batch_max_events = 64;
constexpr std::size_t batch_max_bytes = 64 * 1024;
// A turn's bulk (its model's chunks, and each stretch of a turn that never
// waits) runs in slices of the BulkLane; a slice that has run this long
// yields at its next flush and takes its place in line again.
constexpr std::chrono::microseconds slice_budget{500};
// Batches hold more events (never more bytes) where a flush costs a wait or
// a write of its own: on a store that commits on its own time every flush
// waits for a commit, and a busy session's turn leaves as it is made, one
// write a flush, but for its last batch, which leaves with the answer. So a
// turn of short chunks makes one write and one commit or sync wait.
constexpr std::size_t large_batch_max_events = 4 * batch_max_events;

// What an event adds around its data: {"type":"...","seq":N,"time":T,"data":...}.
constexpr std::size_t event_overhead = 96;

/// Thrown by the sink into the provider's coroutine once the turn has
/// passed --max-turn-bytes: the provider unwinds at once (a scripted turn
/// that never waits included), and the turn ends TURN_TOO_LARGE.
struct TurnTooLarge final : std::exception {
  const char* what() const noexcept override { return "the turn exceeded its byte limit"; }
};

/// The size of `text` as a JSON string literal (append_json_string).
std::size_t json_string_size(std::string_view text) {
  std::size_t size = text.size() + 2;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20) {
      size += 5;  // \u00XX, or a two-byte escape (counted high)
    } else if (c == '"' || c == '\\') {
      size += 1;
    }
  }
  return size;
}

/// One turn in progress. Also the ChunkSink of its model calls: each chunk
/// becomes an assistant/chunk event and is folded into the step's message.
class TurnRun final : public llm::ChunkSink {
 public:
  TurnRun(Session& session, PromptInput& input, EventSink& sink, llm::CancelScope& cancel)
      : session_(session), input_(input), sink_(sink), cancel_(cancel),
        turn_(session.allocate_turn()), commits_async_(session.log_commits_async()),
        max_batch_events_(commits_async_ || session.prompt_follows_closely() ? large_batch_max_events
                                                                              : batch_max_events) {}

  asio::awaitable<PromptOutcome> run() {
    TurnStats& stats = session_.registry().stats();
    stats.active.fetch_add(1, std::memory_order_relaxed);
    stats.total.fetch_add(1, std::memory_order_relaxed);
    const auto started = std::chrono::steady_clock::now();
    struct Settle {
      TurnStats& stats;
      std::chrono::steady_clock::time_point started;
      ~Settle() {
        stats.active.fetch_sub(1, std::memory_order_relaxed);
        stats.record_duration(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      }
    } settle{stats, started};

    add(protocol::TurnStart{turn_});
    add_message(protocol::UserMessage{input_.content}, user_chat_message());
    // turn/start leaves with the first step's start, once the turn has its
    // share of the thread (BulkLane): a session that used little lately
    // gets it at once, and a busy one's turns make one write, not two.
    co_await flush_if_full();
    co_await load_instructions();
    protocol::TurnEndReason reason = co_await run_steps();
    // From here the turn ends as decided; a cancel that came first wins.
    if (reason.kind != protocol::TurnEndReason::Kind::aborted && !cancel_.settle()) reason = aborted();
    add(protocol::TurnEnd{turn_, reason});
    // The prompt is answered only once its turn is as durable as promised.
    if (session_.prompt_follows_closely()) {
      // A busy session's next turn: its last batch waits for the sync and
      // leaves with the answer, one write and one wake of the client where
      // there were two. The answer waited for the sync anyway; only a turn
      // made of one batch shows its first event later, by the sync's time.
      // A prompt after a pause (a person's) sees its events at once.
      co_await log_batch();
      std::exception_ptr sync_failure;
      try {
        co_await session_.end_turn_in_log();
      } catch (...) {
        sync_failure = std::current_exception();
      }
      co_await deliver_batch();
      if (sync_failure) std::rethrow_exception(sync_failure);
    } else {
      co_await flush();
      co_await session_.end_turn_in_log();
    }
    co_return PromptOutcome{.reason = std::move(reason), .final_text = final_text_};
  }

  asio::awaitable<void> on_chunk(protocol::Chunk chunk) override {
    // The provider boundary: whatever bytes the model sent, events hold UTF-8.
    llm::make_valid_utf8(chunk);
    const std::string& data = chunk_data_json(chunk);
    // Checked before the event is made: neither the log nor memory ever
    // holds more of the turn than the limit.
    if (too_large_ || !fits(data.size() + event_overhead)) {
      too_large_ = true;
      throw TurnTooLarge();
    }
    const std::size_t start = begin_event();
    session_.append_serialized_event(block_, assistant_chunk, data);
    std::visit(Fold{*this}, std::move(chunk));
    end_event(start);
    co_await flush_if_full();
  }

  asio::awaitable<void> flush() override {
    if (spans_.empty()) co_return;
    co_await log_batch();
    co_await deliver_batch();
    if (std::chrono::steady_clock::now() - slice_started_ >= slice_budget) co_await enter_bulk_lane();
  }

 private:
  /// A flush's first half: the batch goes to the log (and, on a shared
  /// store, is committed).
  asio::awaitable<void> log_batch() {
    // The log first: nothing is seen before it is logged. The log takes the
    // events out of the very block the client is sent.
    views_.clear();
    for (const auto& [offset, size] : spans_) views_.emplace_back(block_.data() + offset, size);
    try {
      session_.write_events(views_);
      // A shared store: nobody sees an event before its commit.
      if (commits_async_) co_await session_.commit_log();
    } catch (...) {
      // Thrown through the provider too (it flushes before it waits): the
      // turn ends with the store's error, not as a failed model call.
      log_failure_ = std::current_exception();
      throw;
    }
  }
  /// A flush's second half: the logged batch goes to the subscribers and
  /// the prompting client.
  asio::awaitable<void> deliver_batch() {
    const std::size_t count = spans_.size();
    spans_.clear();
    const std::size_t size = block_.size();
    auto block = std::make_shared<const std::string>(std::move(block_));
    block_ = std::string();
    block_.reserve(size);  // the next batch is likely as large
    session_.publish(block, count, input_.owner);
    const bool delivered = co_await sink_.on_events(std::move(block), count);
    // A detached turn runs on for the log and the subscribers.
    if (!delivered && !input_.run_detached) cancel_.cancel("connection closed");
  }

  struct Block {
    std::optional<protocol::BlockType> type;  ///< unset until a chunk says
    std::string text;
    llm::ToolCall call;
  };

  // Events are added by plain functions and flushed by a coroutine without
  // arguments: no temporary is ever passed into a coroutine (GCC 12 rule 4).
  template <class Event>
  void add(const Event& event) {
    const std::size_t start = begin_event();
    // event.type: a static member of most events, StepEvent's own field.
    session_.append_event(block_, event.type, json::value_from(event).get_object());
    end_event(start);
  }
  template <class Event>
  void add_message(const Event& event, llm::ChatMessage message) {
    const std::size_t start = begin_event();
    session_.append_message_event(block_, Event::type, json::value_from(event).get_object(), std::move(message));
    end_event(start);
  }
  asio::awaitable<void> flush_if_full() {
    if (full()) co_await flush();
  }
  asio::awaitable<void> enter_bulk_lane() {
    co_await session_.registry().bulk_lane().enter(session_.bulk_flow());
    slice_started_ = std::chrono::steady_clock::now();
  }

  /// Each event goes into the block wrapped as the sink wants it; the span
  /// of the bare event is what the log gets.
  std::size_t begin_event() {
    block_ += envelope_.before;
    return block_.size();
  }
  void end_event(std::size_t start) {
    spans_.emplace_back(start, block_.size() - start);
    turn_bytes_ += block_.size() - start;
    block_ += envelope_.after;
    block_ += '\n';
  }
  bool full() const { return spans_.size() >= max_batch_events_ || block_.size() >= batch_max_bytes; }

  protocol::TurnEndReason aborted() const {
    return protocol::TurnEndReason::aborted(cancel_.reason().empty() ? "cancelled"
                                                                     : util::valid_utf8(cancel_.reason()));
  }

  /// Whether `bytes` more of events keep the turn within --max-turn-bytes.
  bool fits(std::size_t bytes) const {
    return turn_bytes_ + bytes <= session_.registry().options().max_turn_bytes;
  }
  protocol::TurnEndReason too_large() {
    too_large_ = true;
    return protocol::TurnEndReason::error(
        "the turn's events exceeded " + std::to_string(session_.registry().options().max_turn_bytes) +
            " bytes (--max-turn-bytes)",
        "TURN_TOO_LARGE");
  }
  /// At least the size of the step's assistant/message event.
  std::size_t message_size_bound() const {
    std::size_t size = 512 + json_string_size(input_.model) + json_string_size(input_.provider->name());
    for (const auto& [index, block] : blocks_) {
      size += 64 + json_string_size(block.text) + json_string_size(block.call.id) +
              json_string_size(block.call.name) + json_string_size(block.call.arguments);
    }
    return size;
  }

  asio::awaitable<protocol::TurnEndReason> run_steps() {
    const int max_steps = input_.max_steps > 0 ? input_.max_steps : session_.registry().options().max_steps_per_turn;
    const int max_depth = session_.registry().options().max_delegation_depth;
    for (step_ = 0; step_ < max_steps; ++step_) {
      // Each step is bulk: it waits for its share of the thread (BulkLane).
      co_await enter_bulk_lane();
      if (cancel_.cancelled()) co_return aborted();
      blocks_.clear();
      usage_.reset();
      llm::ModelRequest request;
      request.model = input_.model;
      request.max_tokens = input_.max_tokens;
      request.messages = &session_.messages();
      request.tools = session_.registry().tools().specs(session_.delegation_depth() < max_depth);
      request.context_window = input_.context_window;
      request.settings = input_.settings;
      // Built once per turn, and again only when the offered tools change.
      if (!same_tools(*request.tools)) {
        system_prompt_ = build_system_prompt(session_.registry().options().persona, input_.model,
                                             session_workspace().string(), *request.tools);
        request.system_prompt = system_prompt_;
        add_request_header(request);
      }
      request.system_prompt = system_prompt_;
      request.instructions = instructions_;
      // Past 80 % of the window the conversation is summarized first (again
      // within a turn only once it has grown by the tail's share since).
      if (const std::int64_t tokens = context_tokens(request);
          tokens * 5 >= input_.context_window * 4 &&
          (compacted_at_ < 0 || (tokens - compacted_at_) * 100 >= input_.context_window * 16)) {
        compacted_at_ = tokens;
        co_await compact(tokens);
        if (cancel_.cancelled()) co_return aborted();
      }
      add(protocol::StepEvent::start(turn_, step_));
      // The provider flushes before it waits for the model, so the client
      // sees the step begin before the model answers; a model that answers
      // at once shares the step's first write (and commit) with its chunks.
      co_await flush_if_full();
      llm::ModelResult result;
      try {
        result = co_await input_.provider->stream(request, *this, cancel_);
      } catch (const TurnTooLarge&) {
        // too_large_ is set: handled below.
      } catch (const std::exception& e) {
        if (log_failure_) std::rethrow_exception(log_failure_);
        result = llm::error_result(e.what(), llm::errc::provider);
      }
      if (usage_) reported_tokens_ = reported_context(*usage_);

      // A step cut off by the limit leaves no assistant/message: the chunks
      // logged so far are all of it, and the conversation goes on without
      // it (as after a cancelled turn), the same live and after a reload.
      if (!too_large_ && !blocks_.empty()) {
        if (fits(message_size_bound())) {
          add_assistant_message();
        } else {
          too_large_ = true;
        }
      }
      add(protocol::StepEvent::end(turn_, step_));
      co_await flush_if_full();
      if (too_large_) co_return too_large();
      const std::vector<llm::ToolCall> calls = std::move(step_calls_);
      step_calls_.clear();

      if (cancel_.cancelled() || result.finish == llm::FinishReason::cancelled) co_return aborted();
      // A request the model refused as too long: compacted, then tried once more.
      if (result.finish == llm::FinishReason::error && result.error == llm::errc::context_window_exceeded &&
          !retried_after_compaction_) {
        retried_after_compaction_ = true;
        const std::int64_t tokens = std::max(context_tokens(request), input_.context_window);
        if (co_await compact(tokens)) continue;
        if (cancel_.cancelled()) co_return aborted();
      }
      switch (result.finish) {
        case llm::FinishReason::error:
          // error_result() repairs its texts; a ModelResult built by hand may not.
          co_return protocol::TurnEndReason::error(util::valid_utf8(result.error_message),
                                                   util::valid_utf8(result.error_code), step_);
        case llm::FinishReason::length:
          co_return protocol::TurnEndReason::max_tokens();
        case llm::FinishReason::stop:
        case llm::FinishReason::cancelled:
          co_return protocol::TurnEndReason::completed();
        case llm::FinishReason::tool_calls:
          break;
      }
      if (calls.empty()) {
        co_return protocol::TurnEndReason::error("the model asked for tools but sent no tool call", "PROTOCOL", step_);
      }
      co_await run_tools(calls);
      if (cancel_.cancelled()) co_return aborted();
      if (too_large_) co_return too_large();
    }
    co_return protocol::TurnEndReason::error("the turn exceeded " + std::to_string(max_steps) + " model steps",
                              "MAX_STEPS");
  }

  /// One step's tool calls: their tool/call events, the calls (all at once
  /// when every one of them only reads, else one after another), then
  /// their tool/result events in call order.
  asio::awaitable<void> run_tools(const std::vector<llm::ToolCall>& calls) {
    tool_runs_.clear();
    bool all_read_only = true;
    for (const llm::ToolCall& call : calls) {
      if (!fits(256 + json_string_size(call.id) + json_string_size(call.name) + json_string_size(call.arguments))) {
        too_large_ = true;
        co_return;
      }
      ToolRun& run = tool_runs_.emplace_back();
      run.call = &call;
      run.tool = session_.registry().tools().find(call.name);
      all_read_only = all_read_only && run.tool != nullptr && run.tool->read_only();
    }
    if (all_read_only && tool_runs_.size() > 1) {
      for (ToolRun& run : tool_runs_) add(protocol::ToolCallEvent{turn_, step_, run.call->id, run.call->name,
                                                                  run.call->arguments});
      co_await flush();
      co_await run_in_parallel();
      for (ToolRun& run : tool_runs_) {
        add_tool_result(run);
        if (too_large_) co_return;
      }
      co_await flush_if_full();
      co_return;
    }
    for (ToolRun& run : tool_runs_) {
      add(protocol::ToolCallEvent{turn_, step_, run.call->id, run.call->name, run.call->arguments});
      co_await flush();  // a child's events follow this turn's, never overtake them
      co_await run_one(run);
      add_tool_result(run);
      if (too_large_) co_return;
      co_await flush_if_full();
      if (cancel_.cancelled()) co_return;
    }
  }

  struct ToolRun {
    const llm::ToolCall* call = nullptr;
    std::shared_ptr<tools::Tool> tool;
    tools::ToolResult result;
  };

  /// Every run of tool_runs_ at once on this strand; returns when all ended.
  asio::awaitable<void> run_in_parallel() {
    auto strand = co_await asio::this_coro::executor;
    auto done = util::Wakeup::create(strand);
    std::size_t left = tool_runs_.size();
    for (ToolRun& run : tool_runs_) {
      asio::co_spawn(strand, run_one(run), [&left, done](std::exception_ptr) {
        if (--left == 0) done->notify();
      });
    }
    while (left > 0) co_await done->wait();
  }

  /// Runs one call: its tool found, its arguments checked, in the session's
  /// workspace. Never throws: a failure is the call's result.
  asio::awaitable<void> run_one(ToolRun& run) {
    if (run.tool == nullptr) {
      run.result = tools::ToolResult::failure("UNKNOWN_TOOL", "unknown tool: " + run.call->name);
      co_return;
    }
    std::string problem;
    std::optional<json::object> args = parse_arguments(*run.call, *run.tool, problem);
    if (!args) {
      run.result = tools::ToolResult::failure("INVALID_ARGUMENTS", std::move(problem));
      co_return;
    }
    if (input_.approval_policy == protocol::ApprovalPolicy::ask && run.tool->asks_approval() &&
        !session_.allowed_for_session(run.call->name)) {
      std::optional<tools::ToolResult> refused = co_await seek_approval(run);
      if (refused) {
        run.result = std::move(*refused);
        co_return;
      }
    }
    std::optional<tools::Workspace> workspace;
    try {
      // A network session without a cwd of its client gets a directory of
      // its own, made on first use.
      const std::filesystem::path root = session_workspace();
      std::error_code ignored;
      if (!std::filesystem::exists(root, ignored)) {
        std::filesystem::create_directories(root, ignored);
        std::filesystem::permissions(root, std::filesystem::perms::owner_all, ignored);
      }
      workspace.emplace(root, input_.sandbox == tools::SandboxMode::danger_full_access,
                        session_.registry().options().sandbox.hidden_paths);
    } catch (const std::exception& e) {
      run.result = tools::ToolResult::failure("WORKSPACE_UNAVAILABLE", util::valid_utf8(e.what()));
      co_return;
    }
    tools::ToolContext context{
        .workspace = *workspace,
        .sandbox = input_.sandbox,
        .cancel = cancel_,
        .pool = session_.registry().tool_pool(),
        .reads = session_.reads(),
        .tasks = session_.tasks(),
        .emit = [this](std::string_view type, json::object data) { add_raw(type, data); },
        .delegate = {},
        .sandbox_options = session_.registry().options().sandbox,
    };
    context.ask_user = [this, &run](const json::array& questions) { return ask_questions(run, questions); };
    if (run.tool->delegates()) {
      context.delegate = [this](std::string, std::string prompt) {
        return run_subagent(session_, std::move(prompt), input_, sink_, cancel_);
      };
    }
    try {
      run.result = co_await run.tool->run(*args, context);
    } catch (const std::exception& e) {
      run.result = tools::ToolResult::failure("TOOL_FAILED", util::valid_utf8(e.what()));
    }
    run.result.text = util::valid_utf8(run.result.text);
  }

  /// Reads the AGENTS.md chain of the session's workspace (unchanged since
  /// the last read: from the InstructionCache; else on the setup pool) for
  /// this turn's requests; a file seen for the first time in the session,
  /// or changed since, is logged as context/message.
  asio::awaitable<void> load_instructions() {
    const std::filesystem::path cwd = session_workspace();
    std::optional<std::filesystem::path> root;
    if (input_.instructions_root) root = *input_.instructions_root;
    InstructionCache& cache = session_.registry().instruction_cache();
    std::vector<InstructionFile> files;
    std::optional<std::vector<InstructionFile>> cached;
    // Only a root given (and holding cwd) is known without file system access.
    const bool cacheable = root && is_within(cwd, *root);
    if (cacheable) cached = cache.find(*root, cwd);
    if (cached) {
      files = std::move(*cached);
    } else {
      try {
        std::function<tools::ToolResult()> read = [&files, &cwd, &root, &cache, cacheable] {
          files = cacheable ? cache.read(*root, cwd) : read_instruction_chain(instructions_root(cwd, root), cwd);
          return tools::ToolResult{};
        };
        co_await session_.registry().setup_pool().run(std::move(read));
      } catch (const std::exception&) {
        files.clear();  // unreadable instructions are no instructions
      }
    }
    auto& logged = session_.logged_instructions();
    for (const InstructionFile& file : files) {
      if (const auto it = logged.find(file.path); it != logged.end() && it->second == file.content) continue;
      add(protocol::ContextMessage{.path = file.path, .content = file.content});
      logged[file.path] = file.content;
    }
    instructions_ = instructions_text(files);
  }

  /// Whether `tools` are those the system prompt was last built for; remembers them.
  bool same_tools(const std::vector<llm::ToolSpec>& tools) {
    bool same = prompt_built_ && tools.size() == prompt_tools_.size();
    for (std::size_t i = 0; same && i < tools.size(); ++i) same = tools[i].name == prompt_tools_[i];
    if (same) return true;
    prompt_built_ = true;
    prompt_tools_.clear();
    for (const llm::ToolSpec& tool : tools) prompt_tools_.push_back(tool.name);
    return false;
  }

  /// Logs request/header when what frames the conversation (system prompt,
  /// tools, model and settings) differs from the session's last one.
  void add_request_header(const llm::ModelRequest& request) {
    protocol::RequestHeader header{.provider = std::string(input_.provider->name()),
                                   .model = request.model,
                                   .system_prompt = request.system_prompt};
    for (const llm::ToolSpec& tool : *request.tools) header.tools.push_back(tool.name);
    json::object& settings = header.settings;
    settings["contextWindow"] = input_.context_window;
    if (request.settings.thinking) settings["thinking"] = *request.settings.thinking ? "enabled" : "disabled";
    if (request.settings.reasoning_effort) settings["reasoningEffort"] = *request.settings.reasoning_effort;
    if (request.settings.temperature) settings["temperature"] = *request.settings.temperature;
    if (!request.settings.stop.empty()) {
      settings["stop"] = json::array(request.settings.stop.begin(), request.settings.stop.end());
    }
    if (request.max_tokens) settings["maxTokens"] = *request.max_tokens;
    if (input_.max_steps > 0) settings["maxSteps"] = input_.max_steps;
    const std::uint64_t fingerprint = request_header_fingerprint(json::serialize(json::value_from(header)));
    if (fingerprint == session_.logged_request_header()) return;
    add(header);
    session_.logged_request_header() = fingerprint;
  }

  /// The request's size in tokens: what the provider reported for the last
  /// step of this turn, else the request's bytes / 4.
  std::int64_t context_tokens(const llm::ModelRequest& request) const {
    if (reported_tokens_ > 0) return reported_tokens_;
    return llm::estimate_tokens(*request.messages);
  }

  /// inputTokens + cacheReadTokens + outputTokens of a usage chunk: the
  /// whole prompt and the answer (0 when it has none of them).
  static std::int64_t reported_context(const json::object& usage) {
    std::int64_t tokens = 0;
    for (const std::string_view key : {"inputTokens", "cacheReadTokens", "outputTokens"}) {
      if (const json::value* v = usage.if_contains(key); v != nullptr && v->is_int64()) tokens += v->get_int64();
    }
    return tokens;
  }

  /// Summarizes the conversation so it fits the window again: the session's
  /// provider summarizes every message but the newest ones that fit in 16 %
  /// of the window (a tool call stays with its results), and later requests
  /// send the summary in their place. Logged as compact/start,
  /// compact/summary, compact/end; false (with compact/end's error) when no
  /// summary was made.
  asio::awaitable<bool> compact(std::int64_t tokens_before) {
    add(protocol::CompactStart{turn_});
    co_await flush();
    const std::vector<llm::ChatMessage>& messages = session_.messages();
    const std::int64_t window = input_.context_window;
    // The tail: the newest messages within 16 % of the window, and always
    // the newest one (the request the model is to answer)...
    std::size_t tail = messages.size();
    std::int64_t tail_tokens = 0;
    while (tail > 0) {
      const std::int64_t tokens = llm::estimate_tokens(messages[tail - 1]);
      if (tail < messages.size() && (tail_tokens + tokens) * 100 > window * 16) break;
      tail_tokens += tokens;
      --tail;
    }
    // ...and tool results keep the call they answer.
    while (tail > 0 && tail < messages.size() && messages[tail].role == llm::ChatMessage::Role::tool) {
      --tail;
      tail_tokens += llm::estimate_tokens(messages[tail]);
    }
    protocol::CompactEnd end{.turn = turn_, .error = std::nullopt};
    if (tail == 0) {
      end.error = "nothing to compact: the newest messages alone fill the window";
      add(end);
      co_await flush();
      co_return false;
    }

    // The summarizing request: the older messages (the oldest dropped if
    // even they overflow the window) and the instruction.
    compaction_messages_.assign(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(tail));
    // A message over half the window (a huge tool output, a long answer)
    // is summarized from its beginning and its end.
    const auto half_window_bytes = static_cast<std::size_t>(window) * 2;
    for (llm::ChatMessage& m : compaction_messages_) {
      shorten(m.text, half_window_bytes);
      shorten(m.reasoning, half_window_bytes);
      for (llm::ToolCall& call : m.tool_calls) shorten(call.arguments, half_window_bytes);
    }
    const std::int64_t shadowed_from = session_.message_seqs().front();
    const std::int64_t shadowed_to = session_.message_seqs()[tail - 1];
    while (compaction_messages_.size() > 1 &&
           llm::estimate_tokens(compaction_messages_) * 10 > window * 9) {
      compaction_messages_.erase(compaction_messages_.begin());
    }
    // A tool result without its call is no valid request.
    while (compaction_messages_.size() > 1 && compaction_messages_.front().role == llm::ChatMessage::Role::tool) {
      compaction_messages_.erase(compaction_messages_.begin());
    }
    compaction_messages_.push_back(llm::ChatMessage{.role = llm::ChatMessage::Role::user,
                                                    .text = std::string(compaction_instruction)});
    llm::ModelRequest request;
    request.model = input_.model;
    request.messages = &compaction_messages_;
    request.purpose = llm::RequestPurpose::compaction;
    request.context_window = window;
    SummarySink summary;
    llm::ModelResult result;
    try {
      result = co_await input_.provider->stream(request, summary, cancel_);
    } catch (const std::exception& e) {
      result = llm::error_result(e.what(), llm::errc::provider);
    }
    compaction_messages_.clear();
    if (result.finish == llm::FinishReason::cancelled || cancel_.cancelled()) {
      end.error = "cancelled";
    } else if (result.finish == llm::FinishReason::error) {
      end.error = util::valid_utf8(result.error_message);
    } else if (summary.text.empty()) {
      end.error = "the model returned an empty summary";
    }
    if (end.error) {
      add(end);
      co_await flush();
      co_return false;
    }
    std::string text = util::valid_utf8(summary.text);
    const std::int64_t tokens_after =
        llm::estimate_tokens(llm::ChatMessage{.role = llm::ChatMessage::Role::user, .text = text}) + tail_tokens;
    const std::int64_t summary_seq = session_.next_seq();
    add(protocol::CompactSummary{.summary = text,
                                 .shadowed_from = shadowed_from,
                                 .shadowed_to = shadowed_to,
                                 .tokens_before = tokens_before,
                                 .tokens_after = tokens_after});
    session_.apply_compaction(std::move(text), shadowed_to, summary_seq);
    reported_tokens_ = 0;  // the next request is smaller than the last report
    add(end);
    co_await flush();
    co_return true;
  }

  /// Cuts `text` to about `max` bytes: its first and last halves around a
  /// note of what was left out (kept valid UTF-8).
  static void shorten(std::string& text, std::size_t max) {
    if (text.size() <= max) return;
    const std::size_t half = max / 2;
    std::string cut = text.substr(0, half);
    cut += "\n[... " + std::to_string(text.size() - 2 * half) + " bytes left out ...]\n";
    cut += std::string_view(text).substr(text.size() - half);
    text = util::valid_utf8(cut);
  }

  /// What a compaction request asks of the model.
  static constexpr std::string_view compaction_instruction =
      "Summarize the conversation above for your own later use: the user's goals and instructions, decisions "
      "made, files read or changed and what they hold, commands run and their outcomes, and what is left to do. "
      "Keep names, paths and numbers exact. Reply with the summary only.";

  /// Collects a compaction's answer: its text is the summary, and none of
  /// it becomes an assistant/chunk event.
  struct SummarySink final : llm::ChunkSink {
    std::string text;
    asio::awaitable<void> on_chunk(protocol::Chunk chunk) override {
      if (const auto* delta = std::get_if<protocol::TextDelta>(&chunk)) text += delta->text;
      co_return;
    }
    asio::awaitable<void> flush() override { co_return; }
  };

  /// Asks the session's clients whether `run` may go ahead: approval/requested,
  /// a wait that holds no thread, approval/resolved. Returns the call's
  /// result when it must not run (rejected, timed out, cancelled).
  asio::awaitable<std::optional<tools::ToolResult>> seek_approval(ToolRun& run) {
    const std::string id = "approval-" + std::to_string(turn_) + "-" + std::to_string(decisions_++);
    protocol::ApprovalRequested requested{.turn = turn_,
                                          .step = step_,
                                          .call_id = run.call->id,
                                          .approval_id = id,
                                          .tool_name = run.call->name,
                                          .arguments = run.call->arguments,
                                          .reason = approval_reason(*run.tool)};
    PendingDecisions::Ticket ticket = session_.decisions().open(PendingDecisions::Kind::approval, id);
    add_decision_event(requested);
    co_await flush();
    const auto timeout = session_.registry().options().approval_timeout;
    PendingDecisions::Settled settled = co_await ticket.wait(timeout, cancel_);

    protocol::ApprovalResolved resolved{.approval_id = id, .source = settled.source};
    std::optional<tools::ToolResult> refused;
    switch (settled.source) {
      case protocol::DecisionSource::client: {
        const auto& reply = std::get<protocol::ApproveParams>(settled.reply);
        resolved.outcome = reply.outcome;
        if (reply.outcome == protocol::ApprovalOutcome::rejected) {
          std::string text = "The user rejected this call of " + run.call->name;
          text += reply.message ? ": " + util::valid_utf8(*reply.message) : std::string(".");
          refused = tools::ToolResult::failure("REJECTED", std::move(text));
        }
        break;
      }
      case protocol::DecisionSource::timeout:
        resolved.outcome = protocol::ApprovalOutcome::rejected;
        refused = tools::ToolResult::failure(
            "REJECTED", "Nobody approved this call of " + run.call->name + " within " +
                            std::to_string(timeout.count() / 1000) + " s; it did not run.");
        break;
      case protocol::DecisionSource::cancel:
        resolved.outcome = protocol::ApprovalOutcome::cancelled;
        refused = tools::ToolResult::failure("CANCELLED", "The turn was cancelled before this call was approved.");
        break;
    }
    add_decision_event(resolved);
    co_await flush();
    co_return refused;
  }

  /// What approval/requested tells the person deciding.
  static std::string approval_reason(const tools::Tool& tool) {
    if (tool.source() != "builtin") {
      return std::string(tool.name()) + " comes from " + std::string(tool.source()) +
             " and does not declare itself read-only";
    }
    return std::string(tool.name()) + " can change the workspace or run commands";
  }

  /// ask_user_question's wait: question/requested, the clients' answers (or
  /// the timeout, or the cancel), question/resolved. The result's text is
  /// the answers as a JSON array.
  asio::awaitable<tools::ToolResult> ask_questions(ToolRun& run, const json::array& questions) {
    const std::string id = "question-" + std::to_string(turn_) + "-" + std::to_string(decisions_++);
    protocol::QuestionRequested requested{
        .turn = turn_, .step = step_, .call_id = run.call->id, .question_id = id, .questions = questions};
    PendingDecisions::Ticket ticket = session_.decisions().open(PendingDecisions::Kind::question, id, &questions);
    add_decision_event(requested);
    co_await flush();
    const auto timeout = session_.registry().options().approval_timeout;
    PendingDecisions::Settled settled = co_await ticket.wait(timeout, cancel_);

    protocol::QuestionResolved resolved{.question_id = id};
    tools::ToolResult result;
    switch (settled.source) {
      case protocol::DecisionSource::client: {
        resolved.outcome = protocol::QuestionOutcome::answered;
        json::array answers;
        for (const protocol::Answer& answer : std::get<protocol::AnswerParams>(settled.reply).answers) {
          json::value entry = json::value_from(answer);
          if (json::value* custom = entry.get_object().if_contains("custom")) {
            *custom = util::valid_utf8(custom->get_string());
          }
          answers.push_back(std::move(entry));
        }
        result.text = json::serialize(answers);
        break;
      }
      case protocol::DecisionSource::timeout:
        resolved.outcome = protocol::QuestionOutcome::timeout;
        result = tools::ToolResult::failure("NO_ANSWER", "Nobody answered within " +
                                                             std::to_string(timeout.count() / 1000) +
                                                             " s; decide yourself and say which assumption you made.");
        break;
      case protocol::DecisionSource::cancel:
        resolved.outcome = protocol::QuestionOutcome::cancelled;
        result = tools::ToolResult::failure("CANCELLED", "The turn was cancelled before the user answered.");
        break;
    }
    add_decision_event(resolved);
    co_await flush();
    co_return result;
  }

  /// A decision event, logged and streamed, and kept in the session's
  /// account of pending and session-wide decisions.
  template <class Event>
  void add_decision_event(const Event& event) {
    const json::value data = json::value_from(event);
    const std::size_t start = begin_event();
    session_.append_event(block_, Event::type, data.get_object());
    end_event(start);
    session_.track_decision_event(Event::type, data.get_object());
  }

  /// The call's arguments as an object with every field the schema
  /// requires; nullopt and `problem` otherwise.
  static std::optional<json::object> parse_arguments(const llm::ToolCall& call, const tools::Tool& tool,
                                                     std::string& problem) {
    json::error_code ec;
    json::value parsed = json::parse(call.arguments.empty() ? std::string_view("{}") : call.arguments, ec, {},
                                     util::input_parse_options());
    if (ec || !parsed.is_object()) {
      problem = call.name + ": the arguments must be a JSON object";
      return std::nullopt;
    }
    if (const json::value* required = tool.input_schema().if_contains("required"); required && required->is_array()) {
      for (const json::value& field : required->get_array()) {
        if (field.is_string() && !parsed.get_object().contains(field.get_string())) {
          problem = call.name + ": missing required argument \"" + std::string(field.get_string()) + "\"";
          return std::nullopt;
        }
      }
    }
    return std::move(parsed.get_object());
  }

  /// The directory the session's tools work in: the one recorded in its log,
  /// else the prompt's, else the daemon's.
  std::filesystem::path session_workspace() const {
    if (session_.workspace()) return *session_.workspace();
    if (input_.cwd) return *input_.cwd;
    return std::filesystem::current_path();
  }

  void add_tool_result(ToolRun& run) {
    // Left without a result, as a call cancelled mid-tool is.
    if (!fits(512 + json_string_size(run.call->id) + 2 * json_string_size(run.result.text) +
              json::serialize(run.result.meta).size())) {
      too_large_ = true;
      return;
    }
    const bool is_error = run.result.error.has_value();
    protocol::ToolResult event{.turn = turn_,
                               .step = step_,
                               .call_id = run.call->id,
                               .text = run.result.text,
                               .is_error = is_error,
                               .error_code = is_error ? std::optional(run.result.error->code) : std::nullopt,
                               .meta = std::move(run.result.meta)};
    add_message(event, llm::ChatMessage{.role = llm::ChatMessage::Role::tool,
                                        .text = run.result.text,
                                        .tool_call_id = run.call->id,
                                        .is_error = is_error});
  }

  /// An event a tool asks for (todo/write), logged and streamed like the rest.
  void add_raw(std::string_view type, const json::object& data) {
    const std::size_t start = begin_event();
    session_.append_event(block_, type, data);
    end_event(start);
  }

  /// `{"turn":T,"step":S,"chunk":CHUNK}`, serialized once, from the type
  /// (hot path).
  std::string& chunk_data_json(const protocol::Chunk& chunk) {
    chunk_json_.assign(R"({"turn":)");
    util::append_json_int(chunk_json_, turn_);
    chunk_json_ += R"(,"step":)";
    util::append_json_int(chunk_json_, step_);
    chunk_json_ += R"(,"chunk":)";
    protocol::append_json(chunk_json_, chunk);
    chunk_json_ += '}';
    return chunk_json_;
  }

  /// Folds each chunk into the step's blocks: what assistant/message and
  /// the conversation are built from.
  struct Fold {
    TurnRun& run;
    void operator()(protocol::BlockStart&& c) { run.blocks_[c.index].type = c.type; }
    void operator()(protocol::TextDelta&& c) { append_text(c.index, protocol::BlockType::text, c.text); }
    void operator()(protocol::ReasoningDelta&& c) { append_text(c.index, protocol::BlockType::reasoning, c.text); }
    void operator()(protocol::ToolCallDelta&& c) {
      Block& block = run.blocks_[c.index];
      block.type = protocol::BlockType::tool_call;
      if (!c.id.empty()) block.call.id = std::move(c.id);
      if (!c.name.empty()) block.call.name = std::move(c.name);
      block.call.arguments += c.arguments_delta;
    }
    void operator()(protocol::BlockEnd&&) {}
    void operator()(protocol::UsageChunk&& c) { run.usage_ = std::move(c.usage); }
    void operator()(protocol::FinishChunk&&) {}

    void append_text(int index, protocol::BlockType type, std::string_view text) {
      Block& block = run.blocks_[index];
      if (!block.type) block.type = type;
      block.text += text;
    }
  };

  llm::ChatMessage user_chat_message() const {
    llm::ChatMessage message{.role = llm::ChatMessage::Role::user};
    for (const json::value& block : input_.content) message.text += block.at("text").get_string();
    return message;
  }

  /// The step's assistant/message from its folded blocks, and the same
  /// message for the conversation; the tool calls it asks for are kept for
  /// the step to run.
  void add_assistant_message() {
    llm::ChatMessage chat{.role = llm::ChatMessage::Role::assistant};
    protocol::AssistantMessage message{.turn = turn_,
                                       .step = step_,
                                       .content = {},
                                       .provider = std::string(input_.provider->name()),
                                       .model = input_.model,
                                       .usage = usage_};
    for (auto& [index, block] : blocks_) {
      if (block.type == protocol::BlockType::tool_call) {
        if (block.call.id.empty()) block.call.id = "call_" + std::to_string(turn_) + "_" +
                                                   std::to_string(step_) + "_" + std::to_string(index);
        message.content.push_back(protocol::ContentBlock{.type = protocol::BlockType::tool_call,
                                                         .text = {},
                                                         .id = block.call.id,
                                                         .name = block.call.name,
                                                         .arguments = block.call.arguments});
        step_calls_.push_back(block.call);
        chat.tool_calls.push_back(block.call);
      } else if (block.type) {
        if (block.type == protocol::BlockType::text) chat.text += block.text;
        if (block.type == protocol::BlockType::reasoning) chat.reasoning += block.text;
        message.content.push_back(protocol::ContentBlock{.type = *block.type, .text = block.text});
      }
    }
    final_text_ = chat.text;
    add_message(message, std::move(chat));
  }

  Session& session_;
  PromptInput& input_;
  EventSink& sink_;
  llm::CancelScope& cancel_;
  const std::int64_t turn_;
  int step_ = 0;
  std::map<int, Block> blocks_;
  std::vector<llm::ToolCall> step_calls_;  ///< what the step's assistant/message asked for
  std::vector<ToolRun> tool_runs_;          ///< the step's calls while they run
  std::optional<json::object> usage_;
  std::optional<std::string> final_text_;
  const EventSink::Envelope envelope_ = sink_.envelope(session_.id());
  std::string block_;                                      ///< the batch as the sink takes it
  std::vector<std::pair<std::size_t, std::size_t>> spans_;  ///< each event's place in block_
  std::vector<std::string_view> views_;                     ///< spans_ as the log takes them
  /// A shared store shows nobody an event before its commit: a flush there
  /// is a commit wait.
  const bool commits_async_;
  const std::size_t max_batch_events_;
  std::string chunk_json_;                                  ///< reused for each chunk's data
  std::chrono::steady_clock::time_point slice_started_ = std::chrono::steady_clock::now();
  std::int64_t decisions_ = 0;  ///< approvals and questions asked so far: their ids
  std::int64_t reported_tokens_ = 0;  ///< the provider's context of the last step (reported_context)
  bool retried_after_compaction_ = false;  ///< CONTEXT_WINDOW_EXCEEDED is retried once per turn
  std::int64_t compacted_at_ = -1;         ///< the context size of this turn's last compaction
  std::vector<llm::ChatMessage> compaction_messages_;  ///< a compaction request's messages
  std::string instructions_;  ///< this turn's workspace instructions, as sent
  std::string system_prompt_;  ///< this turn's, for prompt_tools_
  std::vector<std::string> prompt_tools_;
  bool prompt_built_ = false;
  std::size_t turn_bytes_ = 0;  ///< of every event made so far (envelopes not counted)
  bool too_large_ = false;      ///< past --max-turn-bytes: the turn ends TURN_TOO_LARGE
  std::exception_ptr log_failure_;  ///< a flush's write or commit failed: the turn ends with it
};

}  // namespace

asio::awaitable<PromptOutcome> run_turn(Session& session, PromptInput& input, EventSink& sink,
                                        llm::CancelScope& cancel) {
  TurnRun turn(session, input, sink, cancel);
  PromptOutcome outcome = co_await turn.run();
  co_return outcome;
}

}  // namespace harnessd::harness::detail
