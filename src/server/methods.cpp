// The handlers of protocol §4 and the table that binds them to methods.
#include "server/methods.hpp"

#include "harness/session_registry.hpp"
#include "harnessd/rpc/codec.hpp"
#include "store/jsonl_store.hpp"
#include "tools/workspace.hpp"
#include "harnessd/protocol/turn_end.hpp"
#include "llm/model_catalog.hpp"
#include "llm/provider.hpp"
#include "harnessd/protocol/messages.hpp"
#include "harnessd/rpc/error_code.hpp"
#include "util/version.hpp"
#include "server/client_state.hpp"
#include "server/decision_forwarding.hpp"
#include "server/metrics.hpp"
#include "server/outbox_sink.hpp"
#include "server/subscription.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <type_traits>

namespace harnessd::server {
namespace asio = boost::asio;
namespace json = boost::json;
using rpc::ErrorCode;
using rpc::RpcError;

namespace {

/// The store's id of the session this client names `wire_id`: a principal
/// reaches only its own namespace (auth::Principal::store_id).
std::string store_id(const ClientState& client, std::string_view wire_id) {
  return client.principal->store_id(wire_id);
}

/// How notifications name a session: as its owner does.
std::string shown_id(const ServerContext& context, std::string_view store_id) {
  return std::string(auth::notified_id(context.config.credentials.namespaced(), store_id));
}

/// The root of this network client's workspaces: --workspace-root, or
/// ROOT/PRINCIPAL for a principal that is not an administrator.
std::filesystem::path workspace_root_of(const ClientState& client) {
  std::filesystem::path root = client.context.config.workspace_root;
  if (!client.principal->admin) root /= client.principal->name;
  return root;
}

/// A network client's initialize.cwd, taken relative to its workspace root
/// and refused unless it resolves (symlinks included) inside it; nullopt
/// without one (each session then gets ROOT/SESSION_ID).
std::optional<std::string> network_workspace(const ClientState& client, const std::optional<std::string>& cwd) {
  if (!cwd) return std::nullopt;
  std::error_code ec;
  const std::filesystem::path root_path = workspace_root_of(client);
  std::filesystem::create_directories(root_path, ec);
  const std::filesystem::path root = std::filesystem::canonical(root_path, ec);
  if (ec) throw RpcError(ErrorCode::internal_error, "the workspace root is unavailable: " + ec.message());
  const std::filesystem::path requested = std::filesystem::path(*cwd).relative_path();
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(root / requested, ec);
  auto r = root.begin();
  auto c = resolved.begin();
  for (; !ec && r != root.end(); ++r, ++c) {
    if (c == resolved.end() || *c != *r) break;
  }
  if (ec || r != root.end()) {
    throw RpcError(ErrorCode::invalid_params,
                   "params.cwd must be a directory inside the workspace root (taken relative to it)",
                   json::object{{"cwd", *cwd}});
  }
  std::filesystem::create_directories(resolved, ec);
  if (ec || !std::filesystem::is_directory(resolved, ec)) {
    throw RpcError(ErrorCode::invalid_params, "params.cwd is not a directory", json::object{{"cwd", *cwd}});
  }
  return resolved.string();
}

/// Where a new session of this client works: the client's cwd, else (a
/// network client without one) a directory of its own under the root.
std::optional<std::string> session_workspace(const ClientState& client, std::string_view wire_id) {
  if (client.cwd || !client.network) return client.cwd;
  std::string name = store::session_file_name(wire_id);
  name.resize(name.size() - std::string_view(".jsonl").size());
  return (workspace_root_of(client) / name).string();
}

/// A session's window when initialize sets none: the provider profile's for
/// the model, --context-window, the catalog's, then 128,000 tokens.
std::int64_t default_context_window(const ServerContext& context, const llm::Provider& provider,
                                    std::string_view model) {
  if (std::optional<std::int64_t> configured = provider.context_window(model)) return *configured;
  if (context.config.context_window) return *context.config.context_window;
  return llm::catalog_context_window(model).value_or(128'000);
}

protocol::InitializeResult initialize(ClientState& client, protocol::InitializeParams p) {
  if (client.initialized) throw RpcError(ErrorCode::invalid_request, "already initialized");
  ServerContext& context = client.context;
  const std::string provider_name = p.provider.value_or(context.config.default_provider);
  llm::Provider* provider = context.providers.find(provider_name);
  if (provider == nullptr) {
    std::string message = "no adapter registered for provider \"" + provider_name + "\"";
    if (provider_name == "deepseek") message += " (start harnessd with DEEPSEEK_API_KEY set)";
    throw RpcError(ErrorCode::invalid_params, message);
  }
  const std::optional<tools::SandboxMode> sandbox =
      tools::parse_sandbox_mode(p.sandbox.value_or("workspace-write"));
  if (*sandbox == tools::SandboxMode::danger_full_access && client.network && !context.config.allow_full_access) {
    throw RpcError(ErrorCode::invalid_params,
                   "params.sandbox \"danger-full-access\" is refused on a network listener (start harnessd with "
                   "--allow-full-access)",
                   json::object{{"sandbox", "danger-full-access"}});
  }
  if (client.network) {
    client.cwd = network_workspace(client, p.cwd);
  } else if (p.cwd) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(*p.cwd, ec);
    if (ec) throw RpcError(ErrorCode::invalid_params, "params.cwd: " + ec.message());
    client.cwd = absolute.lexically_normal().string();
  } else {
    client.cwd = context.config.default_cwd;
  }
  client.sandbox = *sandbox;
  client.provider = provider;
  client.model = p.model.value_or(provider->default_model());
  client.max_tokens = p.max_tokens;
  client.on_disconnect = p.on_disconnect;
  client.context_window = p.context_window ? *p.context_window : default_context_window(context, *provider, client.model);
  client.settings = llm::ModelSettings{.thinking = p.thinking,
                                       .reasoning_effort = p.reasoning_effort,
                                       .temperature = p.temperature,
                                       .stop = std::move(p.stop)};
  client.max_steps = static_cast<int>(p.max_steps.value_or(0));
  client.approval_policy = p.approval_policy.value_or(context.config.approval_policy.value_or(
      client.network ? protocol::ApprovalPolicy::ask : protocol::ApprovalPolicy::never));
  client.initialized = true;

  protocol::InitializeResult result{.server_name = util::server_name,
                                    .version = util::version,
                                    .implementation = "harnessd",
                                    .protocol_version = util::protocol_version,
                                    .providers = context.providers.names(),
                                    .methods = {}};
  for (const MethodSpec& spec : method_table()) result.methods.emplace_back(spec.name());
  return result;
}

asio::awaitable<protocol::PromptResult> prompt(ClientState& client, protocol::PromptParams p) {
  ServerContext& context = client.context;
  if (client.stopping || context.draining.load(std::memory_order_acquire)) {
    throw RpcError(ErrorCode::shutting_down, "shutting down");
  }
  std::shared_ptr<harness::Session> session = context.sessions.get_or_create(store_id(client, p.session_id));
  // Decided here, on any thread, without waiting for the session's strand:
  // a busy session answers at once even while its turn holds the strand.
  if (!session->try_reserve()) {
    context.sessions.stats().overlap_rejections.fetch_add(1, std::memory_order_relaxed);
    throw RpcError(ErrorCode::session_busy, "session already has an active prompt: " + p.session_id,
                   json::object{{"sessionId", p.session_id}});
  }

  harness::PromptInput input;
  input.content = std::move(p.content_blocks);
  input.provider = client.provider;
  input.model = client.model;
  input.max_tokens = client.max_tokens;
  input.cwd = session_workspace(client, p.session_id);
  input.sandbox = client.sandbox;
  input.owner = &client;
  input.admit = true;
  input.run_detached = client.on_disconnect == protocol::OnDisconnect::continue_running;
  input.approval_policy = client.approval_policy;
  input.context_window = client.context_window;
  input.settings = client.settings;
  if (client.network) input.instructions_root = workspace_root_of(client).string();
  input.max_steps = client.max_steps;

  OutboxSink sink(client.outbox, context.metrics, context.config.credentials.namespaced());
  ++client.prompting[session];
  struct Done {
    ClientState& c;
    const std::shared_ptr<harness::Session>& s;
    ~Done() {
      if (--c.prompting[s] == 0) c.prompting.erase(s);
    }
  } done{client, session};

  harness::PromptOutcome outcome;
  try {
    outcome = co_await asio::co_spawn(session->strand(), session->prompt(std::move(input), sink),
                                      asio::use_awaitable);
  } catch (const store::LeaseHeld& held) {
    // The cluster form of the overlap rule: the turn runs on another node.
    context.sessions.stats().overlap_rejections.fetch_add(1, std::memory_order_relaxed);
    throw RpcError(ErrorCode::session_busy,
                   "session already has an active prompt on node " + held.node() + ": " + p.session_id,
                   json::object{{"sessionId", p.session_id}, {"node", held.node()}});
  }
  // Over the cap of open logs: the least recently used idle sessions go now.
  if (context.sessions.size() > context.sessions.options().max_open_logs) context.sessions.evict_idle();
  if (outcome.overloaded) {
    throw RpcError(ErrorCode::overloaded, "server overloaded",
                   json::object{{"retryAfterMs", outcome.retry_after_ms}});
  }
  const bool max_tokens_ok = context.sessions.options().max_tokens_as_success;
  protocol::PromptResult result;
  result.status = protocol::status_for(outcome.reason, max_tokens_ok);
  result.reason = std::move(outcome.reason);
  co_return result;
}

asio::awaitable<protocol::CancelResult> cancel(ClientState& client, protocol::CancelParams p) {
  const std::string id = store_id(client, p.session_id);
  std::shared_ptr<harness::Session> session = client.context.sessions.find(id);
  bool cancelled = session && session->cancel("cancelled", nullptr);
  store::Coordination* nodes = client.context.sessions.store().coordination();
  if (!cancelled && nodes != nullptr) {
    // The turn may run on another node: that node hears it from the store.
    try {
      cancelled = co_await nodes->forward_cancel(id);
    } catch (const std::system_error& e) {
      spdlog::warn("session/cancel of {}: not forwarded: {}", p.session_id, e.what());
    }
  }
  co_return protocol::CancelResult{.cancelled = cancelled};
}

/// On the session's strand: hands a client's decision to the wait it names.
template <class Reply>
asio::awaitable<harness::PendingDecisions::Resolution> resolve_here(std::shared_ptr<harness::Session> session,
                                                                   Reply reply) {
  co_return session->decisions().resolve(std::move(reply));
}

/// session/approve and session/answer: the decision goes to the turn that
/// waits for it, on this node or (a shared store) on the node running the
/// session; -32602 with data.reason "not-pending" when nothing waits for it.
template <class Reply>
asio::awaitable<protocol::DecisionResult> decide(ClientState& client, Reply reply, std::string_view kind,
                                                 const std::string& decision_id) {
  const std::string wire_id = reply.session_id;
  reply.session_id = store_id(client, wire_id);
  harness::SessionRegistry& sessions = client.context.sessions;
  using Status = harness::PendingDecisions::Resolution::Status;
  harness::PendingDecisions::Resolution resolution;
  if (std::shared_ptr<harness::Session> session = sessions.find(reply.session_id)) {
    resolution = co_await asio::co_spawn(session->strand(), resolve_here(session, reply), asio::use_awaitable);
  }
  if (resolution.status == Status::not_pending && sessions.store().coordination() != nullptr) {
    rpc::EventEnvelope wire = rpc::session_event_envelope(shown_id(client.context, reply.session_id));
    harness::EventSink::Envelope envelope{std::move(wire.before), std::move(wire.after)};
    const bool forwarded = co_await forward_decision(sessions, std::move(reply), std::move(envelope));
    resolution.status = forwarded ? Status::accepted : Status::not_pending;
  }
  switch (resolution.status) {
    case Status::accepted:
      break;
    case Status::invalid:
      throw RpcError(ErrorCode::invalid_params, resolution.problem,
                     json::object{{"sessionId", wire_id}, {std::string(kind) + "Id", decision_id}});
    case Status::not_pending:
      throw RpcError(ErrorCode::invalid_params, "no pending " + std::string(kind) + " " + decision_id + " in session " + wire_id,
                     json::object{{"reason", "not-pending"}, {"sessionId", wire_id}, {std::string(kind) + "Id", decision_id}});
  }
  co_return protocol::DecisionResult{.accepted = true};
}

asio::awaitable<protocol::DecisionResult> approve(ClientState& client, protocol::ApproveParams p) {
  const std::string id = p.approval_id;
  protocol::DecisionResult result = co_await decide(client, std::move(p), "approval", id);
  co_return result;
}

asio::awaitable<protocol::DecisionResult> answer(ClientState& client, protocol::AnswerParams p) {
  const std::string id = p.question_id;
  protocol::DecisionResult result = co_await decide(client, std::move(p), "question", id);
  co_return result;
}

protocol::ShutdownResult shutdown(ClientState&, protocol::ShutdownParams) { return {}; }

// A page of session/events holds about this much, so one answer stays a
// bounded frame whatever the events' sizes.
constexpr std::size_t page_max_bytes = 4 * 1024 * 1024;

/// A page is charged to the connection's response budget from before it is
/// read until its answer is written: a peer that asks and does not read
/// holds a bounded number of pages (ServerConfig::max_response_bytes*).
asio::awaitable<ResponseCharge> reserve_page(ClientState& client) {
  std::optional<ResponseCharge> charge = co_await client.outbox->reserve(page_max_bytes);
  if (!charge) {
    throw RpcError(ErrorCode::overloaded, "server overloaded", json::object{{"retryAfterMs", 1000}});
  }
  co_return std::move(*charge);
}

/// At most the bytes of a session/events answer holding `page`.
std::size_t answer_bytes(const store::EventPage& page) {
  std::size_t bytes = 32;
  for (const std::string& event : page.events) bytes += event.size() + 1;
  return bytes;
}

[[noreturn]] void unknown_session(const std::string& id) {
  throw RpcError(ErrorCode::invalid_params, "unknown session: " + id, json::object{{"sessionId", id}});
}

/// session/list's `waiting` of a session loaded here (or null).
std::optional<std::string> waiting_for(const harness::Session* session) {
  std::optional<std::string> waiting;
  if (session == nullptr) return waiting;
  if (const auto kind = session->waiting()) waiting.emplace(harness::to_string(*kind));
  return waiting;
}

asio::awaitable<protocol::ListResult> list(ClientState& client, protocol::ListParams p) {
  harness::SessionRegistry& sessions = client.context.sessions;
  const auth::Principal& principal = *client.principal;
  const auto limit = static_cast<std::size_t>(p.limit);
  protocol::ListResult result;
  std::optional<std::string> cursor = std::move(p.cursor);
  // A principal sees only its own sessions: the store's pages are filtered,
  // and read on until the page is full, the store is done, or this call has
  // looked at a bounded number of sessions (then the short page carries a
  // cursor to go on from).
  std::size_t scanned = 0;
  const std::size_t scan_budget = 16 * limit + 4096;
  do {
    store::ListPage page;
    try {
      page = co_await sessions.store().list(std::move(cursor), limit - result.sessions.size());
    } catch (const std::invalid_argument&) {
      throw RpcError(ErrorCode::invalid_params, "params.cursor is not a cursor of session/list");
    }
    cursor = std::move(page.next_cursor);
    scanned += page.sessions.size();
    for (store::SessionInfo& info : page.sessions) {
      const std::optional<std::string_view> wire = principal.wire_id(info.id);
      if (!wire) continue;
      const std::shared_ptr<harness::Session> loaded = sessions.find(info.id);
      std::optional<std::string> parent;
      if (info.parent) {
        if (const std::optional<std::string_view> parent_wire = principal.wire_id(*info.parent)) {
          parent = std::string(*parent_wire);
        }
      }
      result.sessions.push_back(protocol::SessionSummary{.session_id = std::string(*wire),
                                                         .created_at = info.created_at_ms,
                                                         .updated_at = info.updated_at_ms,
                                                         .last_seq = info.last_seq,
                                                         .turns = info.turns,
                                                         .running = (loaded && loaded->reserved()) || info.leased,
                                                         .parent_session_id = std::move(parent),
                                                         .waiting = waiting_for(loaded.get())});
    }
  } while (cursor && result.sessions.size() < limit && scanned < scan_budget);
  result.next_cursor = std::move(cursor);
  co_return result;
}

asio::awaitable<protocol::EventsResult> events(ClientState& client, protocol::EventsParams p) {
  const std::string id = store_id(client, p.session_id);
  ResponseCharge charge = co_await reserve_page(client);
  std::optional<store::EventPage> page = co_await client.context.sessions.store().read_events(
      id, p.after_seq, static_cast<std::size_t>(p.limit), page_max_bytes);
  if (!page) unknown_session(p.session_id);
  charge.resize(answer_bytes(*page));
  client.outbox->charge_next_frames(std::move(charge));  // the answer carries it until written
  co_return protocol::EventsResult{.events = std::move(page->events), .last_seq = page->last_seq, .more = page->more};
}

/// On the session's strand: loads it if it has a log, and subscribes.
/// Returns the seq the subscription starts after; null for no log.
asio::awaitable<std::optional<std::int64_t>> attach(const ServerContext& context,
                                                    std::shared_ptr<harness::Session> session,
                                                    std::shared_ptr<Subscription> subscription) {
  std::optional<std::string> no_cwd;  // a named local: no temporary crosses the co_await (GCC 12)
  const bool loaded = co_await session->ensure_loaded(std::move(no_cwd), store::OpenMode::existing);
  std::optional<std::int64_t> last_seq;
  if (!loaded) co_return last_seq;
  // Another node may have logged more since this one loaded the session.
  if (session->registry().store().coordination() != nullptr) {
    rpc::EventEnvelope wire = rpc::session_event_envelope(shown_id(context, session->id()));
    harness::EventSink::Envelope envelope{std::move(wire.before), std::move(wire.after)};
    co_await session->catch_up(std::move(envelope));
  }
  last_seq = session->subscribe(std::move(subscription));
  co_return last_seq;
}

asio::awaitable<void> detach(std::shared_ptr<harness::Session> session, std::shared_ptr<Subscription> subscription) {
  session->unsubscribe(*subscription);
  co_return;
}

/// Queues the logged events after `after_seq` up to `last_seq` as
/// session.event notifications, a page (one block) at a time.
asio::awaitable<void> replay(ClientState& client, const std::string& session_id, std::int64_t after_seq,
                             std::int64_t last_seq) {
  const rpc::EventEnvelope envelope = rpc::session_event_envelope(shown_id(client.context, session_id));
  while (after_seq < last_seq) {
    const auto limit = static_cast<std::size_t>(std::min(last_seq - after_seq, protocol::max_page_limit));
    ResponseCharge charge = co_await reserve_page(client);
    std::optional<store::EventPage> page =
        co_await client.context.sessions.store().read_events(session_id, after_seq, limit, page_max_bytes);
    if (!page || page->events.empty()) break;  // the store keeps no events (memory)
    std::string block;
    for (const std::string& event : page->events) {
      block += envelope.before;
      block += event;
      block += envelope.after;
      block += '\n';
    }
    const std::size_t count = page->events.size();
    after_seq += static_cast<std::int64_t>(count);
    charge.resize(block.size());
    Block charged = Outbox::charged_block(std::move(block), std::move(charge));
    if (co_await client.outbox->push(std::move(charged), count)) client.context.metrics.notifications_queued(count);
  }
}

asio::awaitable<protocol::SubscribeResult> subscribe(ClientState& client, protocol::SubscribeParams p) {
  ServerContext& context = client.context;
  if (client.subscriptions.contains(p.session_id)) {
    throw RpcError(ErrorCode::invalid_params, "already subscribed: " + p.session_id,
                   json::object{{"sessionId", p.session_id}});
  }
  if (client.subscriptions.size() >= context.config.max_subscriptions) {
    throw RpcError(ErrorCode::invalid_params,
                   "too many subscriptions (" + std::to_string(context.config.max_subscriptions) + ")");
  }
  const std::string id = store_id(client, p.session_id);
  std::shared_ptr<harness::Session> session = context.sessions.get_or_create(id);
  auto subscription =
      std::make_shared<Subscription>(&client, client.outbox, context.config.subscriber_max_bytes, context.metrics);
  // Taken before the first wait, so a second subscribe of this connection
  // to this session is refused even while the first one loads.
  client.subscriptions.emplace(p.session_id, ClientState::Subscribed{session, subscription});
  context.metrics.subscription_opened();
  std::optional<std::int64_t> last_seq;
  try {
    last_seq =
        co_await asio::co_spawn(session->strand(), attach(context, session, subscription), asio::use_awaitable);
    if (!last_seq) unknown_session(p.session_id);
    // The connection may have ended its subscriptions while this one attached.
    if (!client.subscribed(p.session_id, *subscription)) throw RpcError(ErrorCode::shutting_down, "shutting down");
    if (p.after_seq) co_await replay(client, id, *p.after_seq, *last_seq);
  } catch (...) {
    if (client.subscribed(p.session_id, *subscription)) {
      client.subscriptions.erase(p.session_id);
      context.metrics.subscription_closed();
    }
    asio::co_spawn(session->strand(), detach(session, subscription), asio::detached);
    throw;
  }
  co_await subscription->go_live();
  co_return protocol::SubscribeResult{.last_seq = *last_seq};
}

asio::awaitable<protocol::UnsubscribeResult> unsubscribe(ClientState& client, protocol::UnsubscribeParams p) {
  auto it = client.subscriptions.find(p.session_id);
  if (it == client.subscriptions.end()) co_return protocol::UnsubscribeResult{.unsubscribed = false};
  ClientState::Subscribed subscribed = std::move(it->second);
  client.subscriptions.erase(it);
  client.context.metrics.subscription_closed();
  // Once this returns no block reaches the subscription, so nothing of the
  // session follows the answer.
  co_await asio::co_spawn(subscribed.session->strand(), detach(subscribed.session, subscribed.subscription),
                          asio::use_awaitable);
  co_return protocol::UnsubscribeResult{.unsubscribed = true};
}

protocol::ToolsListResult tools_list(ClientState& client, protocol::ToolsListParams) {
  protocol::ToolsListResult result;
  // A client's sessions are top-level: subagent is on offer unless
  // delegation is off altogether.
  const bool may_delegate = client.context.sessions.options().max_delegation_depth > 0;
  for (const std::shared_ptr<tools::Tool>& tool : client.context.sessions.tools().all()) {
    if (tool->delegates() && !may_delegate) continue;
    result.tools.push_back(protocol::ToolInfo{.name = std::string(tool->name()),
                                              .description = std::string(tool->description()),
                                              .input_schema = tool->input_schema(),
                                              .read_only = tool->read_only(),
                                              .source = std::string(tool->source())});
  }
  return result;
}

template <class T>
struct is_awaitable : std::false_type {};
template <class T>
struct is_awaitable<asio::awaitable<T>> : std::true_type {};

/// A result's wire form, serialized.
template <class Result>
std::string result_text(const Result& result) {
  if constexpr (requires { protocol::to_json_text(result); }) {
    return protocol::to_json_text(result);
  } else {
    return json::serialize(json::value_from(result));
  }
}

/// The table's one adapter: params from JSON (invalid → -32602), the typed
/// handler, the result to JSON.
template <class Params, auto Handler>
asio::awaitable<std::string> invoke(ClientState& client, const json::value& raw) {
  Params params = json::value_to<Params>(raw);
  using Returned = decltype(Handler(client, std::move(params)));
  std::string out;
  if constexpr (is_awaitable<Returned>::value) {
    auto result = co_await Handler(client, std::move(params));
    out = result_text(result);
  } else {
    out = result_text(Handler(client, std::move(params)));
  }
  co_return out;
}

using protocol::Method;
constexpr MethodSpec table[] = {
    {.method = Method::initialize,
     .authenticates = true,
     .invoke = &invoke<protocol::InitializeParams, &initialize>},
    {.method = Method::session_prompt,
     .requires_initialize = true,
     .invoke = &invoke<protocol::PromptParams, &prompt>},
    {.method = Method::session_cancel,
     .requires_initialize = true,
     .invoke = &invoke<protocol::CancelParams, &cancel>},
    {.method = Method::shutdown, .answers_last = true, .invoke = &invoke<protocol::ShutdownParams, &shutdown>},
    {.method = Method::session_list,
     .requires_initialize = true,
     .invoke = &invoke<protocol::ListParams, &list>},
    {.method = Method::session_events,
     .requires_initialize = true,
     .invoke = &invoke<protocol::EventsParams, &events>},
    {.method = Method::session_subscribe,
     .requires_initialize = true,
     .invoke = &invoke<protocol::SubscribeParams, &subscribe>},
    {.method = Method::session_unsubscribe,
     .requires_initialize = true,
     .invoke = &invoke<protocol::UnsubscribeParams, &unsubscribe>},
    {.method = Method::tools_list,
     .requires_initialize = true,
     .invoke = &invoke<protocol::ToolsListParams, &tools_list>},
    {.method = Method::session_approve,
     .requires_initialize = true,
     .invoke = &invoke<protocol::ApproveParams, &approve>},
    {.method = Method::session_answer,
     .requires_initialize = true,
     .invoke = &invoke<protocol::AnswerParams, &answer>},
};

constexpr bool table_in_method_order() {
  if (std::size(table) != protocol::method_names.size()) return false;
  for (std::size_t i = 0; i < std::size(table); ++i) {
    if (static_cast<std::size_t>(table[i].method) != i) return false;
  }
  return true;
}
static_assert(table_in_method_order(), "one row per protocol::Method, in its order");

}  // namespace

std::span<const MethodSpec> method_table() { return table; }

const MethodSpec* find_method(std::string_view name) {
  const std::optional<protocol::Method> method = protocol::find_method(name);
  return method ? &table[static_cast<std::size_t>(*method)] : nullptr;
}

}  // namespace harnessd::server
