// The handlers of protocol §4 and the table that binds them to methods.
#include "server/methods.hpp"

#include "harness/session_registry.hpp"
#include "harnessd/protocol/turn_end.hpp"
#include "llm/provider.hpp"
#include "harnessd/protocol/messages.hpp"
#include "harnessd/rpc/error_code.hpp"
#include "util/version.hpp"
#include "server/client_state.hpp"
#include "server/outbox_sink.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <filesystem>
#include <type_traits>

namespace harnessd::server {
namespace asio = boost::asio;
namespace json = boost::json;
using rpc::ErrorCode;
using rpc::RpcError;

namespace {

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
  if (p.cwd) {
    std::error_code ec;
    auto absolute = std::filesystem::absolute(*p.cwd, ec);
    if (ec) throw RpcError(ErrorCode::invalid_params, "params.cwd: " + ec.message());
    client.cwd = absolute.lexically_normal().string();
  } else {
    client.cwd = context.config.default_cwd;
  }
  client.provider = provider;
  client.model = p.model.value_or(provider->default_model());
  client.max_tokens = p.max_tokens;
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
  if (client.stopping) throw RpcError(ErrorCode::shutting_down, "shutting down");
  std::shared_ptr<harness::Session> session = context.sessions.get_or_create(p.session_id);
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
  input.cwd = client.cwd;
  input.owner = &client;
  input.admit = true;

  OutboxSink sink(client.outbox, context.metrics);
  ++client.prompting[session];
  struct Done {
    ClientState& c;
    const std::shared_ptr<harness::Session>& s;
    ~Done() {
      if (--c.prompting[s] == 0) c.prompting.erase(s);
    }
  } done{client, session};

  harness::PromptOutcome outcome = co_await asio::co_spawn(
      session->strand(), session->prompt(std::move(input), sink), asio::use_awaitable);
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

protocol::CancelResult cancel(ClientState& client, protocol::CancelParams p) {
  std::shared_ptr<harness::Session> session = client.context.sessions.find(p.session_id);
  return protocol::CancelResult{.cancelled = session && session->cancel("cancelled", nullptr)};
}

protocol::ShutdownResult shutdown(ClientState&, protocol::ShutdownParams) { return {}; }

template <class T>
struct is_awaitable : std::false_type {};
template <class T>
struct is_awaitable<asio::awaitable<T>> : std::true_type {};

/// The table's one adapter: params from JSON (invalid → -32602), the typed
/// handler, the result to JSON.
template <class Params, auto Handler>
asio::awaitable<json::value> invoke(ClientState& client, const json::value& raw) {
  Params params = json::value_to<Params>(raw);
  using Returned = decltype(Handler(client, std::move(params)));
  json::value out;
  if constexpr (is_awaitable<Returned>::value) {
    auto result = co_await Handler(client, std::move(params));
    out = json::value_from(result);
  } else {
    out = json::value_from(Handler(client, std::move(params)));
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
