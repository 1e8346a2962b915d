// harnessd: serves LLM agent sessions over directional JSON-RPC 2.0 on
// stdio, TCP and WebSocket. This file only wires flags to the layers.
#include "auth/credentials.hpp"
#include "config_file.hpp"
#include "daemon_config.hpp"
#include "harness/session_registry.hpp"
#include "llm/deepseek_provider.hpp"
#include "llm/provider.hpp"
#include "llm/scripted_provider.hpp"
#include "mcp/servers.hpp"
#include "server/decision_forwarding.hpp"
#include "server/metrics.hpp"
#include "server/server.hpp"
#include "server/tls_context.hpp"
#include "store/jsonl_store.hpp"
#include "store/memory_store.hpp"
#include "store/postgres_store.hpp"
#include "tools/registry.hpp"
#include "tools/sandbox.hpp"
#include "util/listen_url.hpp"
#include "util/systemd.hpp"
#include "util/version.hpp"

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
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>
#include <thread>

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace harnessd;

/// A configuration the daemon cannot start with (exit code 2, like a bad flag).
struct StartupError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string env_or(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

/// A node's default name in session leases: HOSTNAME-PID, distinct per process.
std::string default_node_id() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "harnessd");
  return std::string(host) + "-" + std::to_string(::getpid());
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

/// Whether a bound listener's address reaches only this machine.
bool loopback_listener(const std::string& url) {
  const util::ListenUrl parsed = util::parse_listen_url(url);
  boost::system::error_code ec;
  asio::ip::address address = asio::ip::make_address(parsed.host, ec);
  if (ec) return false;
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  return address.is_loopback();
}

/// Who may connect, from --auth-file or --auth-token-file (neither: anyone).
auth::Credentials load_credentials(const DaemonConfig& config) {
  try {
    if (!config.auth_file.empty()) return auth::Credentials::from_file(config.auth_file);
    if (!config.auth_token_file.empty()) return auth::Credentials::single_token(read_token_file(config.auth_token_file));
  } catch (const std::exception& e) {
    throw StartupError(e.what());
  }
  return {};
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

/// WATCHDOG=1 at half the interval systemd expects; it comes from the
/// control strand, so a wedged event loop stops it and systemd restarts us.
asio::awaitable<void> watchdog(asio::steady_timer& timer, std::chrono::milliseconds period) {
  for (;;) {
    util::systemd::notify("WATCHDOG=1");
    timer.expires_after(period);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
  }
}

/// The scripted provider, the built-in `deepseek` profile (when
/// DEEPSEEK_API_KEY is set and no [providers.deepseek] replaces it) and every
/// [providers.NAME] profile. A profile that cannot start is a start-up error.
llm::ProviderRegistry make_providers(const asio::any_io_executor& executor, DaemonConfig& config) {
  llm::ProviderRegistry providers;
  providers.add(std::make_shared<llm::ScriptedProvider>());
  const auto configured = [&](std::string_view name) {
    return std::ranges::any_of(config.provider_profiles, [&](const auto& p) { return p.name == name; });
  };
  const llm::DeepSeekConfig from_env = llm::deepseek_config_from_env();
  if (!from_env.api_key.empty() && !configured("deepseek")) {
    config.deepseek.api_key = from_env.api_key;
    config.deepseek.base_url = from_env.base_url;
    spdlog::info("deepseek provider enabled ({})", config.deepseek.base_url);  // the key is never logged
    providers.add(std::make_shared<llm::DeepSeekProvider>(executor, config.deepseek));
  }
  for (const llm::ProviderProfile& profile : config.provider_profiles) {
    llm::DeepSeekConfig endpoint = config.deepseek;  // the --model-* timeouts and limits
    endpoint.name = profile.name;
    endpoint.base_url = profile.base_url;
    endpoint.default_model = profile.default_model;
    endpoint.context_windows = profile.context_windows;
    endpoint.api_key.clear();
    if (!profile.api_key_env.empty()) {
      const char* key = std::getenv(profile.api_key_env.c_str());
      if (key == nullptr || *key == '\0') {
        throw StartupError(profile.where + ": [providers." + profile.name + "] api_key_env " + profile.api_key_env +
                           " is not set");
      }
      endpoint.api_key = key;
    }
    try {
      providers.add(std::make_shared<llm::DeepSeekProvider>(executor, std::move(endpoint)));
    } catch (const std::invalid_argument& e) {
      throw StartupError(profile.where + ": [providers." + profile.name + "] base_url \"" + profile.base_url +
                         "\": " + e.what());
    }
    spdlog::info("provider {} enabled ({}, {} by default)", profile.name, profile.base_url, profile.default_model);
  }
  const std::string& provider = config.server.default_provider;
  if (providers.find(provider) == nullptr) {
    throw StartupError("--provider " + provider + " is not available" +
                       (provider == "deepseek" ? " (set DEEPSEEK_API_KEY)" : " (no [providers." + provider + "] table)"));
  }
  return providers;
}

int run(DaemonConfig config) {
  auto logger = spdlog::stderr_color_mt("harnessd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  std::signal(SIGPIPE, SIG_IGN);
  // Write batches of a few MiB are reused from the heap instead of being
  // fresh mmap'd (and page-faulted) allocations each time.
  ::mallopt(M_MMAP_THRESHOLD, 4 << 20);
  const rlim_t fd_limit = raise_fd_limit();

  if (config.threads == 0) config.threads = std::max(1u, std::thread::hardware_concurrency());
  const std::string session_root = config.session_root.empty()
                                       ? env_or("DSH_SESSION_ROOT", ".sessions")
                                       : config.session_root;
  // Declared before the io_context, so destroyed after it: coroutine frames
  // the io_context destroys at an abrupt stop may still use the store.
  std::unique_ptr<store::EventStore> store;
  store::PostgresStore* postgres = nullptr;
  // Declared before everything that owns sockets or timers on it (the
  // providers' pooled connections): those must be destroyed first.
  asio::io_context io(static_cast<int>(config.threads));
  if (config.store == "memory") {
    store = std::make_unique<store::MemoryStore>();
  } else if (config.store == "postgres") {
    if (config.postgres.node_id.empty()) config.postgres.node_id = default_node_id();
    auto pg = std::make_unique<store::PostgresStore>(io.get_executor(), config.postgres);
    try {
      pg->migrate_now();
    } catch (const std::exception& e) {
      throw StartupError(e.what());
    }
    postgres = pg.get();
    store = std::move(pg);
    spdlog::info("postgres store: node {}, lease ttl {} ms, pool {}", config.postgres.node_id,
                 config.postgres.lease_ttl.count(), config.postgres.pool_size);
  } else {
    store = std::make_unique<store::JsonlStore>(session_root, config.jsonl);
  }
  llm::ProviderRegistry providers = make_providers(io.get_executor(), config);
  harness::HarnessOptions& harness_options = config.harness;
  harness_options.max_open_logs =
      config.max_open_logs > 0 ? config.max_open_logs : std::max<std::size_t>(16, fd_limit / 4);
  // A memory session holds no file, and evicting it would end it (its
  // events live nowhere else): only --session-idle-ms ends one.
  if (config.store == "memory") harness_options.max_open_logs = std::numeric_limits<std::size_t>::max();
  // A running turn holds its log (and its children's) open: with few
  // descriptors, fewer turns run at once and the rest wait in line.
  harness_options.max_running_turns =
      config.max_running_turns > 0 ? config.max_running_turns : std::clamp<std::size_t>(fd_limit / 8, 1, 256);
  if (config.server.workspace_root.empty()) {
    config.server.workspace_root =
        (std::filesystem::absolute(session_root).lexically_normal().parent_path() / "workspaces").string();
  }
  config.server.workspace_root = std::filesystem::absolute(config.server.workspace_root).lexically_normal().string();
  // bash never sees the session logs, nor the other sessions' workspaces.
  harness_options.sandbox.hidden_paths = {std::filesystem::absolute(session_root).lexically_normal().string(),
                                          config.server.workspace_root};
  harness::SessionRegistry sessions(io.get_executor(), *store, harness_options);
  tools::add_builtin_tools(sessions.tools(), harness_options.sandbox);
  // Their tools join the registry as each server answers: start-up does not wait.
  mcp::Servers mcp_servers(io.get_executor(), sessions.tools(), std::move(config.mcp));
  mcp_servers.start();
  if (postgres != nullptr) {
    // session/cancel sent to another node for a turn running here.
    postgres->on_forwarded_cancel([&sessions](const std::string& id) {
      if (std::shared_ptr<harness::Session> session = sessions.find(id)) session->cancel("cancelled");
    });
    // session/approve and session/answer sent to another node for a turn waiting here.
    postgres->on_forwarded_decision(
        [&sessions](const std::string& message) { server::apply_forwarded_decision(sessions, message); });
    postgres->start();
  }
  server::Metrics metrics;

  if (const char* cwd = std::getenv("DSH_CWD"); cwd != nullptr && *cwd != '\0') config.server.default_cwd = cwd;
  config.server.credentials = load_credentials(config);
  if (config.server.credentials.required()) {
    spdlog::info("authentication: {} principal(s){}", config.server.credentials.size(),
                 config.server.credentials.namespaced() ? ", sessions per principal" : "");
  }
  if (config.server.max_connections == 0) config.server.max_connections = std::max<std::size_t>(64, fd_limit / 2);
  server::ServerContext context{config.server, sessions, providers, metrics};
  server::Server server(io, context);
  std::shared_ptr<server::TlsContext> tls;
  if (!config.tls_cert.empty() || !config.tls_key.empty()) {
    if (config.tls_cert.empty() || config.tls_key.empty()) throw StartupError("--tls-cert and --tls-key go together");
    try {
      tls = std::make_shared<server::TlsContext>(config.tls_cert, config.tls_key);
    } catch (const std::exception& e) {
      throw StartupError(e.what());
    }
    server.set_tls(tls);
  }

  // Sockets from systemd (socket activation) are served as their
  // FileDescriptorName says; --listen adds more, and the defaults apply only
  // when neither gives a listener.
  std::vector<std::string> bound;
  for (const util::systemd::ListenFd& socket : util::systemd::take_listen_fds()) {
    const std::string scheme = socket.name.empty() ? "ws" : socket.name;
    if (scheme != "ws" && scheme != "tcp" && scheme != "wss" && scheme != "tls") {
      throw std::runtime_error("socket " + std::to_string(socket.fd) + " from systemd is named \"" + socket.name +
                               "\"; FileDescriptorName must be ws, tcp, wss or tls");
    }
    bound.push_back(server.adopt(socket.fd, scheme));
  }
  std::vector<std::string> listen = config.listen;
  if (listen.empty() && bound.empty() && !config.stdio) listen = default_listen;
  for (const std::string& url : listen) {
    if (!tls && (url.starts_with("wss://") || url.starts_with("tls://"))) {
      throw StartupError("--listen " + url + ": wss:// and tls:// listeners need --tls-cert and --tls-key");
    }
  }
  for (const std::string& url : listen) bound.push_back(server.listen(util::parse_listen_url(url)));
  // Tools run commands for whoever reaches a listener: a port open to the
  // network without authentication is a mistake unless said out loud.
  if (!config.server.credentials.required()) {
    for (const std::string& url : bound) {
      if (loopback_listener(url)) continue;
      if (!config.insecure_no_auth) {
        throw StartupError(url + " is reachable from other machines and no authentication is configured: "
                                 "give --auth-token-file FILE or --auth-file FILE, listen on 127.0.0.1, or "
                                 "pass --insecure-no-auth if every client that can reach it is trusted");
      }
      spdlog::warn("{}: listening without authentication (--insecure-no-auth)", url);
    }
  }

  // Graceful stop: signal -> drain (no new connections or prompts; running
  // turns get --drain-timeout-ms to finish) -> stop (cancel what still runs,
  // answer, flush) -> exit; a second signal or the grace period forces the
  // exit. Everything of the stop sequence runs on one strand.
  auto control = asio::make_strand(io);
  asio::signal_set signals(control, SIGINT, SIGTERM);
  asio::signal_set reload_signal(control, SIGHUP);
  asio::steady_timer grace(control);
  asio::steady_timer drain_timer(control);
  asio::steady_timer housekeeping_timer(control);
  asio::steady_timer watchdog_timer(control);
  bool stopping = false;
  bool draining = false;
  std::function<void()> begin_stop = [&] {
    if (stopping) return;
    stopping = true;
    drain_timer.cancel();
    grace.expires_after(config.shutdown_grace);
    grace.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      spdlog::warn("connections did not settle within {} ms; exiting", config.shutdown_grace.count());
      io.stop();
    });
    // Once the last connection has closed nothing else is pending and
    // io.run() returns.
    server.stop([&] {
      asio::post(control, [&] {
        grace.cancel();
        signals.cancel();
        reload_signal.cancel();
        housekeeping_timer.cancel();
        watchdog_timer.cancel();
        sessions.kill_background_tasks();
        mcp_servers.stop();
        store->begin_stop();
      });
    });
  };
  // Turns in flight: running, or admitted to wait for a slot.
  const auto turns_in_flight = [&] { return sessions.admission().running() + sessions.admission().queued(); };
  const auto turns_ended = [&] {
    return sessions.stats().total.load() - static_cast<std::uint64_t>(sessions.stats().active.load());
  };
  // The drain's progress check: a timer loop of 20 ms until the turns are
  // done or the deadline passes. Lives as long as run(), like the handlers
  // it is copied into.
  std::chrono::steady_clock::time_point drain_deadline;
  std::uint64_t ended_before_drain = 0;
  std::function<void(boost::system::error_code)> drain_check = [&](boost::system::error_code ec) {
    if (ec || stopping) return;
    const std::size_t left = turns_in_flight();
    const std::uint64_t finished = turns_ended() - ended_before_drain;
    if (left == 0 || std::chrono::steady_clock::now() >= drain_deadline) {
      spdlog::info("drain: {} turn(s) finished, {} cancelled", finished, left);
      begin_stop();
      return;
    }
    drain_timer.expires_after(std::chrono::milliseconds(20));
    drain_timer.async_wait(drain_check);
  };
  std::function<void()> begin_drain = [&] {
    if (draining || stopping) return;
    draining = true;
    util::systemd::notify("STOPPING=1");
    server.drain();
    const std::size_t running = turns_in_flight();
    if (running == 0 || config.drain_timeout.count() == 0) {
      if (running > 0) spdlog::info("drain: {} turn(s) running, cancelled at once (--drain-timeout-ms 0)", running);
      begin_stop();
      return;
    }
    spdlog::info("drain: no new connections or prompts; {} turn(s) running get up to {} ms to finish", running,
                 config.drain_timeout.count());
    drain_deadline = std::chrono::steady_clock::now() + config.drain_timeout;
    ended_before_drain = turns_ended();
    drain_check({});
  };
  std::function<void(boost::system::error_code, int)> on_signal = [&](boost::system::error_code ec, int signo) {
    if (ec) return;
    if (stopping || draining) {
      spdlog::warn("signal {} again: exiting now", signo);
      io.stop();
      return;
    }
    spdlog::info("signal {}: stopping", signo);
    begin_drain();
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);
  // SIGHUP: a renewed certificate is used for new connections; a broken one
  // is logged and the old pair stays.
  std::function<void(boost::system::error_code, int)> on_reload = [&](boost::system::error_code ec, int) {
    if (ec) return;
    if (tls) {
      const std::string error = tls->reload();
      if (error.empty()) {
        spdlog::info("SIGHUP: reloaded the TLS certificate {}", tls->cert_file());
      } else {
        spdlog::error("SIGHUP: TLS certificate not reloaded, the old one stays: {}", error);
      }
    } else {
      spdlog::info("SIGHUP: nothing to reload (no --tls-cert)");
    }
    reload_signal.async_wait(on_reload);
  };
  reload_signal.async_wait(on_reload);

  const auto housekeeping_period =
      std::clamp(harness_options.session_idle / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  asio::co_spawn(control, housekeeping(sessions, housekeeping_timer, housekeeping_period), asio::detached);

  if (config.stdio) {
    // The stdio client owns this process: when it is done, so is the daemon.
    server.serve_stdio([&] { asio::post(control, begin_stop); });
  }
  if (!config.ready_file.empty()) write_ready_file(config.ready_file, bound);
  // Every listener accepts from here on: systemd may send clients.
  util::systemd::notify("READY=1");
  if (const auto interval = util::systemd::watchdog_interval(); interval.count() > 0) {
    asio::co_spawn(control, watchdog(watchdog_timer, std::chrono::duration_cast<std::chrono::milliseconds>(interval / 2)),
                   asio::detached);
  }
  spdlog::info("harnessd {} ready (store: {}{}, threads: {}, max open logs: {}, max running turns: {})",
               util::version, store->kind(),
               store->kind() == "jsonl" ? ", sync: " + std::string(store::to_string(config.jsonl.sync)) : "",
               config.threads,
               config.store == "memory" ? std::string("unbounded") : std::to_string(harness_options.max_open_logs),
               harness_options.max_running_turns);

  std::vector<std::thread> pool;
  for (unsigned i = 1; i < config.threads; ++i) pool.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : pool) t.join();
  store->stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  DaemonConfig config;
  CLI::App app{
      "harnessd: serves LLM agent sessions over directional JSON-RPC 2.0.\n"
      "Clients send requests (initialize, session/prompt, session/cancel, shutdown);\n"
      "the daemon streams every session event as a notification, then answers.\n\n"
      "Examples:\n"
      "  harnessd                                  # ws://127.0.0.1:7878 (web UI, /healthz, /metrics) + tcp://127.0.0.1:7879\n"
      "  harnessd --stdio                          # one client on stdin/stdout (logs go to stderr)\n"
      "  harnessd --listen tcp://127.0.0.1:0 --ready-file ready.json\n"
      "  DEEPSEEK_API_KEY=sk-... harnessd --provider deepseek   # real model (DEEPSEEK_BASE_URL to override)\n"
      "  harnessd --listen wss://0.0.0.0:7878 --tls-cert cert.pem --tls-key key.pem   # TLS; SIGHUP reloads it\n"
      "  harnessd --config /etc/harnessd/harnessd.toml   # the same flags from a TOML file\n\n"
      "SIGTERM drains: no new clients or prompts, running turns get --drain-timeout-ms to finish.\n",
      "harnessd"};
  app.set_version_flag("--version", std::string("harnessd ") + util::version);
  add_flags(app, config);
  auto config_file = std::make_shared<TomlConfig>(app);
  add_config_option(app, config_file);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A bad value from --config: say where it is.
    // --help and --version exit 0; every bad flag or config file, 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    const std::string where = config_file->where(e.what());
    if (where.empty()) {
      app.exit(e);
    } else {
      std::fprintf(stderr, "harnessd: %s (%s)\n", e.what(), where.c_str());
    }
    return 2;
  }
  config.mcp = config_file->mcp_servers();
  config.provider_profiles = config_file->provider_profiles();

  if (config.check_sandbox) {
    std::fputs(tools::sandbox_report(config.harness.sandbox).c_str(), stdout);
    return tools::sandbox_available(config.harness.sandbox, nullptr) ? 0 : 1;
  }
  try {
    return run(std::move(config));
  } catch (const StartupError& e) {
    std::fprintf(stderr, "harnessd: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "harnessd: %s\n", e.what());
    return 1;
  }
}
