// harnessd: serves LLM agent sessions over directional JSON-RPC 2.0 on
// stdio, TCP and WebSocket. This file only wires flags to the layers.
#include "harnessd/harness/session_registry.hpp"
#include "harnessd/llm/deepseek_provider.hpp"
#include "harnessd/llm/provider.hpp"
#include "harnessd/llm/scripted_provider.hpp"
#include "harnessd/server/metrics.hpp"
#include "harnessd/server/server.hpp"
#include "harnessd/store/jsonl_store.hpp"
#include "harnessd/store/memory_store.hpp"
#include "harnessd/util/listen_url.hpp"
#include "harnessd/util/version.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <malloc.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace harnessd;

struct Options {
  bool stdio = false;
  std::vector<std::string> listen;
  std::string ready_file;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::string session_root;
  std::string store = "jsonl";
  std::string sync = "turn";
  unsigned sync_interval_ms = 100;
  unsigned session_idle_ms = 300'000;
  std::size_t max_open_logs = 0;  // 0: a quarter of the descriptor limit
  std::size_t max_running_turns = 0;  // 0: 256, or an eighth of the descriptor limit if lower
  std::size_t max_queued_turns = 4096;
  std::size_t max_frame_bytes = 8 * 1024 * 1024;
  bool max_tokens_as_success = false;
  std::string provider = "scripted";
  std::string log_level = "info";
  unsigned write_timeout_ms = 30'000;
  unsigned handshake_timeout_ms = 10'000;
  unsigned idle_timeout_ms = 0;
  unsigned shutdown_grace_ms = 10'000;
  std::string auth_token_file;
  std::vector<std::string> allow_origins;
  unsigned ws_idle_timeout_ms = 60'000;
  bool ws_deflate = false;
  std::size_t ws_deflate_threshold = 1024;
  unsigned model_connect_timeout_ms = 10'000;
  unsigned model_first_byte_timeout_ms = 60'000;
  unsigned model_idle_timeout_ms = 60'000;
  int model_attempts = 3;
  unsigned model_retry_delay_ms = 500;
  std::string system_prompt = "You are a helpful assistant.";
};

std::string env_or(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

void write_ready_file(const std::string& path, const std::vector<std::string>& urls) {
  json::array listen;
  for (const auto& url : urls) listen.push_back(json::string(url));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json::serialize(json::object{{"listen", std::move(listen)}}) << '\n';
    if (!out) throw std::runtime_error("cannot write ready file " + tmp);
  }
  std::filesystem::rename(tmp, path);  // readers never see a partial file
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read --auth-token-file " + path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) throw std::runtime_error("--auth-token-file " + path + " is empty");
  return token;
}

/// Raises the soft descriptor limit to the hard one (logs and sockets both
/// need descriptors) and returns the limit in force.
rlim_t raise_fd_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  const rlim_t soft = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) limit.rlim_cur = soft;
  }
  spdlog::info("file descriptors: soft limit {} (was {}), hard limit {}", limit.rlim_cur, soft, limit.rlim_max);
  return limit.rlim_cur;
}

/// Evicts idle sessions and gives freed memory back to the OS, periodically.
/// A plain function, not a lambda: GCC 12 mishandles lambda coroutine captures.
asio::awaitable<void> housekeeping(harness::SessionRegistry& sessions, asio::steady_timer& timer,
                                   std::chrono::milliseconds period) {
  for (;;) {
    timer.expires_after(period);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    if (sessions.evict_idle() > 0) ::malloc_trim(0);
  }
}

int run(const Options& options) {
  auto logger = spdlog::stderr_color_mt("harnessd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  std::signal(SIGPIPE, SIG_IGN);
  // Write batches of a few MiB are reused from the heap instead of being
  // fresh mmap'd (and page-faulted) allocations each time.
  ::mallopt(M_MMAP_THRESHOLD, 4 << 20);
  const rlim_t fd_limit = raise_fd_limit();

  const std::string session_root = options.session_root.empty()
                                       ? env_or("DSH_SESSION_ROOT", ".sessions")
                                       : options.session_root;
  std::unique_ptr<store::EventStore> store;
  if (options.store == "memory") {
    store = std::make_unique<store::MemoryStore>();
  } else {
    store::JsonlOptions jsonl;
    jsonl.sync = *store::parse_sync_mode(options.sync);
    jsonl.sync_interval = std::chrono::milliseconds(options.sync_interval_ms);
    store = std::make_unique<store::JsonlStore>(session_root, jsonl);
  }

  // Declared before everything that owns sockets or timers on it (the
  // providers' pooled connections): those must be destroyed first.
  asio::io_context io(static_cast<int>(options.threads));
  llm::ProviderRegistry providers;
  providers.add(std::make_shared<llm::ScriptedProvider>());
  llm::DeepSeekConfig deepseek = llm::deepseek_config_from_env();
  if (!deepseek.api_key.empty()) {
    deepseek.connect_timeout = std::chrono::milliseconds(options.model_connect_timeout_ms);
    deepseek.first_byte_timeout = std::chrono::milliseconds(options.model_first_byte_timeout_ms);
    deepseek.idle_timeout = std::chrono::milliseconds(options.model_idle_timeout_ms);
    deepseek.max_attempts = options.model_attempts;
    deepseek.retry_base_delay = std::chrono::milliseconds(options.model_retry_delay_ms);
    deepseek.system_prompt = options.system_prompt;
    spdlog::info("deepseek provider enabled ({})", deepseek.base_url);  // the key is never logged
    providers.add(std::make_shared<llm::DeepSeekProvider>(io.get_executor(), std::move(deepseek)));
  }
  if (providers.find(options.provider) == nullptr) {
    throw std::runtime_error("--provider " + options.provider + " is not available" +
                             (options.provider == "deepseek" ? " (set DEEPSEEK_API_KEY)" : ""));
  }

  harness::HarnessOptions harness_options;
  harness_options.max_tokens_as_success = options.max_tokens_as_success;
  harness_options.session_idle = std::chrono::milliseconds(options.session_idle_ms);
  harness_options.max_open_logs =
      options.max_open_logs > 0 ? options.max_open_logs : std::max<std::size_t>(16, fd_limit / 4);
  // A running turn holds its log (and its children's) open: with few
  // descriptors, fewer turns run at once and the rest wait in line.
  harness_options.max_running_turns =
      options.max_running_turns > 0 ? options.max_running_turns
                                    : std::clamp<std::size_t>(fd_limit / 8, 1, 256);
  harness_options.max_queued_turns = options.max_queued_turns;
  harness::SessionRegistry sessions(io.get_executor(), *store, harness_options);
  server::Metrics metrics;

  server::ServerConfig config;
  config.max_frame_bytes = options.max_frame_bytes;
  config.write_timeout = std::chrono::milliseconds(options.write_timeout_ms);
  config.handshake_timeout = std::chrono::milliseconds(options.handshake_timeout_ms);
  config.idle_timeout = std::chrono::milliseconds(options.idle_timeout_ms);
  config.default_provider = options.provider;
  if (const char* cwd = std::getenv("DSH_CWD"); cwd != nullptr && *cwd != '\0') config.default_cwd = cwd;
  if (!options.auth_token_file.empty()) config.auth_token = read_token_file(options.auth_token_file);
  config.allowed_origins = options.allow_origins;
  config.ws_idle_timeout = std::chrono::milliseconds(options.ws_idle_timeout_ms);
  config.ws_deflate = options.ws_deflate;
  config.ws_deflate_threshold = options.ws_deflate_threshold;
  server::ServerContext context{config, sessions, providers, metrics};
  server::Server server(io, context);

  std::vector<std::string> listen = options.listen;
  if (listen.empty() && !options.stdio) listen = {"ws://127.0.0.1:7878", "tcp://127.0.0.1:7879"};
  std::vector<std::string> bound;
  for (const std::string& url : listen) bound.push_back(server.listen(util::parse_listen_url(url)));

  // Graceful stop: signal -> stop accepting -> cancel turns -> answer ->
  // flush -> exit; a second signal or the grace period forces the exit.
  // Everything of the stop sequence runs on one strand.
  auto control = asio::make_strand(io);
  asio::signal_set signals(control, SIGINT, SIGTERM);
  asio::steady_timer grace(control);
  asio::steady_timer housekeeping_timer(control);
  bool stopping = false;
  std::function<void()> begin_stop = [&] {
    if (stopping) return;
    stopping = true;
    grace.expires_after(std::chrono::milliseconds(options.shutdown_grace_ms));
    grace.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      spdlog::warn("connections did not settle within {} ms; exiting", options.shutdown_grace_ms);
      io.stop();
    });
    // Once the last connection has closed nothing else is pending and
    // io.run() returns.
    server.stop([&] {
      asio::post(control, [&] {
        grace.cancel();
        signals.cancel();
        housekeeping_timer.cancel();
      });
    });
  };
  std::function<void(boost::system::error_code, int)> on_signal = [&](boost::system::error_code ec, int signo) {
    if (ec) return;
    if (stopping) {
      spdlog::warn("signal {} again: exiting now", signo);
      io.stop();
      return;
    }
    spdlog::info("signal {}: stopping", signo);
    begin_stop();
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);

  const auto housekeeping_period =
      std::clamp(harness_options.session_idle / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  asio::co_spawn(control, housekeeping(sessions, housekeeping_timer, housekeeping_period), asio::detached);

  if (options.stdio) {
    // The stdio client owns this process: when it is done, so is the daemon.
    server.serve_stdio([&] { asio::post(control, begin_stop); });
  }
  if (!options.ready_file.empty()) write_ready_file(options.ready_file, bound);
  spdlog::info("harnessd {} ready (store: {}{}, threads: {}, max open logs: {}, max running turns: {})",
               util::version, store->kind(), store->kind() == "jsonl" ? ", sync: " + options.sync : "",
               options.threads, harness_options.max_open_logs, harness_options.max_running_turns);

  std::vector<std::thread> pool;
  for (unsigned i = 1; i < options.threads; ++i) pool.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : pool) t.join();
  store->stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{
      "harnessd: serves LLM agent sessions over directional JSON-RPC 2.0.\n"
      "Clients send requests (initialize, session/prompt, session/cancel, shutdown);\n"
      "the daemon streams every session event as a notification, then answers.\n\n"
      "Examples:\n"
      "  harnessd                                  # ws://127.0.0.1:7878 (web UI, /healthz, /metrics) + tcp://127.0.0.1:7879\n"
      "  harnessd --stdio                          # one client on stdin/stdout (logs go to stderr)\n"
      "  harnessd --listen tcp://127.0.0.1:0 --ready-file ready.json\n"
      "  DEEPSEEK_API_KEY=sk-... harnessd --provider deepseek   # real model (DEEPSEEK_BASE_URL to override)\n",
      "harnessd"};
  app.set_version_flag("--version", std::string("harnessd ") + util::version);
  app.add_flag("--stdio", options.stdio, "Serve one client on stdin/stdout (NDJSON); exit when it is done");
  app.add_option("--listen", options.listen,
                 "Listen on tcp://HOST:PORT (NDJSON) or ws://HOST:PORT (WebSocket + HTTP); repeatable; "
                 "port 0 picks a free port. Default without --stdio: ws://127.0.0.1:7878 and tcp://127.0.0.1:7879");
  app.add_option("--ready-file", options.ready_file,
                 "Once every listener is bound, write {\"listen\":[URL,...]} to this file");
  app.add_option("--threads", options.threads, "I/O threads (default: number of cores)")
      ->check(CLI::Range(1u, 256u));
  app.add_option("--session-root", options.session_root,
                 "Directory of the JSONL session logs (env DSH_SESSION_ROOT, default ./.sessions)");
  app.add_option("--store", options.store, "Event store: jsonl (durable, default) or memory")
      ->check(CLI::IsMember({"jsonl", "memory"}));
  app.add_option("--sync", options.sync,
                 "When session logs reach the disk: turn (default: every prompt is answered only after "
                 "its turn is synced; many turns share one sync), batch (synced every --sync-interval-ms; "
                 "answers do not wait), none (left to the OS). A daemon crash loses nothing in any mode")
      ->check(CLI::IsMember({"turn", "batch", "none"}));
  app.add_option("--sync-interval-ms", options.sync_interval_ms, "With --sync batch: the sync period (default 100)")
      ->check(CLI::Range(1u, 60'000u));
  app.add_option("--session-idle-ms", options.session_idle_ms,
                 "Evict a session (close its log, free its memory) after this long without a prompt; "
                 "its next prompt loads it again (default 300000)")
      ->check(CLI::Range(1u, 86'400'000u));
  app.add_option("--max-open-logs", options.max_open_logs,
                 "Loaded sessions (one open log each) before the least recently used idle ones are "
                 "evicted (default: a quarter of the file descriptor limit)");
  app.add_option("--max-running-turns", options.max_running_turns,
                 "Turns running at once; later prompts wait in line (default 256, or an eighth of "
                 "the file descriptor limit if that is lower)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  app.add_option("--max-queued-turns", options.max_queued_turns,
                 "Prompts waiting for a running slot; beyond it a prompt is refused with -32005 "
                 "\"server overloaded\" and data.retryAfterMs (default 4096)");
  app.add_option("--provider", options.provider,
                 "Provider of clients that name none in initialize (default scripted)");
  app.add_option("--max-frame-bytes", options.max_frame_bytes,
                 "Largest accepted message in bytes (default 8 MiB)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30));
  app.add_flag("--max-tokens-as-success", options.max_tokens_as_success,
               "Report turns that stop at the token limit as status ok instead of error");
  app.add_option("--write-timeout-ms", options.write_timeout_ms,
                 "Close a client that accepts no bytes for this long while output waits (default 30000)");
  app.add_option("--handshake-timeout-ms", options.handshake_timeout_ms,
                 "Close a network client that has not initialized (and authenticated) by then (default 10000)")
      ->check(CLI::Range(1u, 3'600'000u));
  app.add_option("--idle-timeout-ms", options.idle_timeout_ms,
                 "Close a network client that sends no request and runs no prompt for this long "
                 "(default 0: never)");
  app.add_option("--shutdown-grace-ms", options.shutdown_grace_ms,
                 "On SIGINT/SIGTERM, wait this long for turns to settle before exiting (default 10000)");
  app.add_option("--auth-token-file", options.auth_token_file,
                 "Require this bearer token from network clients: WebSocket upgrade "
                 "(Authorization: Bearer or ?access_token=) and TCP (initialize authToken)");
  app.add_option("--allow-origin", options.allow_origins,
                 "Allow WebSocket upgrades from this Origin (repeatable); same-origin and "
                 "Origin-less clients are always allowed");
  app.add_option("--ws-idle-timeout-ms", options.ws_idle_timeout_ms,
                 "Ping idle WebSocket clients and close those silent for this long (default 60000)");
  app.add_flag("--ws-deflate", options.ws_deflate, "Enable permessage-deflate on WebSocket");
  app.add_option("--ws-deflate-threshold", options.ws_deflate_threshold,
                 "With --ws-deflate, compress messages of at least this many bytes (default 1024)");
  app.add_option("--system-prompt", options.system_prompt, "System prompt sent to the deepseek provider");
  app.add_option("--model-connect-timeout-ms", options.model_connect_timeout_ms,
                 "deepseek: connect + TLS handshake deadline (default 10000)");
  app.add_option("--model-first-byte-timeout-ms", options.model_first_byte_timeout_ms,
                 "deepseek: deadline for the response headers (default 60000)");
  app.add_option("--model-idle-timeout-ms", options.model_idle_timeout_ms,
                 "deepseek: longest silence inside a stream (default 60000)");
  app.add_option("--model-attempts", options.model_attempts,
                 "deepseek: tries for 429/5xx/connect failures before anything streamed (default 3)")
      ->check(CLI::Range(1, 10));
  app.add_option("--model-retry-delay-ms", options.model_retry_delay_ms,
                 "deepseek: first retry delay, doubled per attempt (default 500)");
  app.add_option("--log-level", options.log_level, "trace, debug, info, warn, error or off (default info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  CLI11_PARSE(app, argc, argv);

  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "harnessd: %s\n", e.what());
    return 1;
  }
}
