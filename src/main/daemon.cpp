#include "daemon.hpp"

#include "llm/deepseek_provider.hpp"
#include "llm/provider.hpp"
#include "llm/scripted_provider.hpp"
#include "mcp/servers.hpp"
#include "server/decision_forwarding.hpp"
#include "server/metrics.hpp"
#include "server/server.hpp"
#include "server/tls_context.hpp"
#include "store_kinds.hpp"
#include "tools/registry.hpp"
#include "util/listen_url.hpp"
#include "util/systemd.hpp"
#include "util/version.hpp"

#include <boost/asio/post.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

namespace harnessd {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;

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

/// The scripted provider, the built-in `deepseek` profile (when
/// DEEPSEEK_API_KEY is set and no [providers.deepseek] replaces it) and every
/// [providers.NAME] profile. A profile that cannot start is a start-up error.
std::unique_ptr<llm::ProviderRegistry> make_providers(const asio::any_io_executor& executor, DaemonConfig& config) {
  auto providers = std::make_unique<llm::ProviderRegistry>();
  providers->add(std::make_shared<llm::ScriptedProvider>());
  const auto configured = [&](std::string_view name) {
    return std::ranges::any_of(config.provider_profiles, [&](const auto& p) { return p.name == name; });
  };
  const llm::DeepSeekConfig from_env = llm::deepseek_config_from_env();
  if (!from_env.api_key.empty() && !configured("deepseek")) {
    config.deepseek.api_key = from_env.api_key;
    config.deepseek.base_url = from_env.base_url;
    spdlog::info("deepseek provider enabled ({})", config.deepseek.base_url);  // the key is never logged
    providers->add(std::make_shared<llm::DeepSeekProvider>(executor, config.deepseek));
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
      providers->add(std::make_shared<llm::DeepSeekProvider>(executor, std::move(endpoint)));
    } catch (const std::invalid_argument& e) {
      throw StartupError(profile.where + ": [providers." + profile.name + "] base_url \"" + profile.base_url +
                         "\": " + e.what());
    }
    spdlog::info("provider {} enabled ({}, {} by default)", profile.name, profile.base_url, profile.default_model);
  }
  const std::string& provider = config.server.default_provider;
  if (providers->find(provider) == nullptr) {
    throw StartupError("--provider " + provider + " is not available" +
                       (provider == "deepseek" ? " (set DEEPSEEK_API_KEY)" : " (no [providers." + provider + "] table)"));
  }
  return providers;
}

/// Logging to stderr, the process-wide settings, and the thread count.
DaemonConfig set_up_process(DaemonConfig config) {
  auto logger = spdlog::stderr_color_mt("harnessd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  std::signal(SIGPIPE, SIG_IGN);
  // Write batches of a few MiB are reused from the heap instead of being
  // fresh mmap'd (and page-faulted) allocations each time.
  ::mallopt(M_MMAP_THRESHOLD, 4 << 20);
  if (config.threads == 0) config.threads = std::max(1u, std::thread::hardware_concurrency());
  if (config.session_root.empty()) config.session_root = env_or("DSH_SESSION_ROOT", ".sessions");
  return config;
}

}  // namespace

Daemon::Daemon(DaemonConfig config)
    : config_(set_up_process(std::move(config))),
      fd_limit_(raise_fd_limit()),
      session_root_(config_.session_root),
      io_(static_cast<int>(config_.threads)),
      control_(asio::make_strand(io_)),
      stop_signals_(control_, SIGINT, SIGTERM),
      reload_signal_(control_, SIGHUP),
      grace_timer_(control_),
      drain_timer_(control_) {}

Daemon::~Daemon() = default;

int Daemon::run() {
  open_store();
  providers_ = make_providers(io_.get_executor(), config_);
  start_sessions();
  configure_server();
  bind_listeners();
  refuse_unauthenticated_exposure();
  watch_signals();
  start_background_work();
  announce_ready();

  std::vector<std::thread> pool;
  for (unsigned i = 1; i < config_.threads; ++i) pool.emplace_back([this] { io_.run(); });
  io_.run();
  for (auto& t : pool) t.join();
  finish();
  if (forced_exit_) {
    // The io_context still holds the frames of turns and connections cut
    // short, and destroying them would run their cleanup against sessions
    // and connections already gone. Their logs are closed and synced
    // (finish), so the process ends here, as a second signal asks.
    spdlog::default_logger()->flush();
    std::_Exit(0);
  }
  return 0;
}

// --- start -----------------------------------------------------------------

void Daemon::open_store() {
  const StoreKind* kind = find_store_kind(config_.store);
  if (kind == nullptr) throw StartupError("--store " + config_.store + " is not a store");
  StoreSetup setup{config_, session_root_, io_.get_executor()};
  try {
    store_ = kind->open(setup);
  } catch (const std::exception& e) {
    throw StartupError(e.what());
  }
}

void Daemon::start_sessions() {
  harness::HarnessOptions& options = config_.harness;
  // A store whose sessions cannot be reopened (memory) keeps every one
  // open: only --session-idle-ms ends one.
  if (!find_store_kind(config_.store)->sessions_reopen) {
    options.max_open_logs = std::numeric_limits<std::size_t>::max();
  } else {
    options.max_open_logs = config_.max_open_logs > 0 ? config_.max_open_logs : std::max<std::size_t>(16, fd_limit_ / 4);
  }
  // A running turn holds its log (and its children's) open: with few
  // descriptors, fewer turns run at once and the rest wait in line.
  const std::size_t running_default = find_store_kind(config_.store)->default_max_running_turns;
  options.max_running_turns = config_.max_running_turns > 0
                                  ? config_.max_running_turns
                                  : std::clamp<std::size_t>(fd_limit_ / 8, 1, running_default);
  options.bulk_slots = config_.threads;
  std::string& workspace_root = config_.server.workspace_root;
  if (workspace_root.empty()) {
    workspace_root = (std::filesystem::absolute(session_root_).lexically_normal().parent_path() / "workspaces").string();
  }
  workspace_root = std::filesystem::absolute(workspace_root).lexically_normal().string();
  // bash never sees the session logs, nor the other sessions' workspaces.
  options.sandbox.hidden_paths = {std::filesystem::absolute(session_root_).lexically_normal().string(),
                                  workspace_root};
  sessions_ = std::make_unique<harness::SessionRegistry>(io_.get_executor(), *store_, options);
  tools::add_builtin_tools(sessions_->tools(), options.sandbox);
  // Their tools join the registry as each server answers: start-up does not wait.
  mcp_servers_ = std::make_unique<mcp::Servers>(io_.get_executor(), sessions_->tools(), std::move(config_.mcp));
  mcp_servers_->start();
  if (store::Coordination* nodes = store_->coordination()) {
    harness::SessionRegistry& sessions = *sessions_;
    // session/cancel sent to another node for a turn running here.
    nodes->on_forwarded_cancel([&sessions](const std::string& id) {
      if (std::shared_ptr<harness::Session> session = sessions.find(id)) session->cancel("cancelled");
    });
    // session/approve and session/answer sent to another node for a turn waiting here.
    nodes->on_forwarded_decision(
        [&sessions](const std::string& message) { server::apply_forwarded_decision(sessions, message); });
  }
  store_->start();
}

void Daemon::configure_server() {
  server::ServerConfig& server_config = config_.server;
  if (const char* cwd = std::getenv("DSH_CWD"); cwd != nullptr && *cwd != '\0') server_config.default_cwd = cwd;
  server_config.credentials = load_credentials(config_);
  if (server_config.credentials.required()) {
    spdlog::info("authentication: {} principal(s){}", server_config.credentials.size(),
                 server_config.credentials.namespaced() ? ", sessions per principal" : "");
  }
  if (server_config.max_connections == 0) server_config.max_connections = std::max<std::size_t>(64, fd_limit_ / 2);
  metrics_ = std::make_unique<server::Metrics>();
  context_ = std::make_unique<server::ServerContext>(server_config, *sessions_, *providers_, *metrics_);
  server_ = std::make_unique<server::Server>(io_, *context_);
  if (!config_.tls_cert.empty() || !config_.tls_key.empty()) {
    if (config_.tls_cert.empty() || config_.tls_key.empty()) throw StartupError("--tls-cert and --tls-key go together");
    try {
      tls_ = std::make_shared<server::TlsContext>(config_.tls_cert, config_.tls_key);
    } catch (const std::exception& e) {
      throw StartupError(e.what());
    }
    server_->set_tls(tls_);
  }
}

void Daemon::bind_listeners() {
  // Sockets from systemd (socket activation) are served as their
  // FileDescriptorName says; --listen adds more, and the defaults apply only
  // when neither gives a listener.
  for (const util::systemd::ListenFd& socket : util::systemd::take_listen_fds()) {
    const std::string scheme = socket.name.empty() ? "ws" : socket.name;
    if (scheme != "ws" && scheme != "tcp" && scheme != "wss" && scheme != "tls") {
      throw std::runtime_error("socket " + std::to_string(socket.fd) + " from systemd is named \"" + socket.name +
                               "\"; FileDescriptorName must be ws, tcp, wss or tls");
    }
    bound_.push_back(server_->adopt(socket.fd, scheme));
  }
  std::vector<std::string> listen = config_.listen;
  if (listen.empty() && bound_.empty() && !config_.stdio) listen = default_listen;
  for (const std::string& url : listen) {
    if (!tls_ && (url.starts_with("wss://") || url.starts_with("tls://"))) {
      throw StartupError("--listen " + url + ": wss:// and tls:// listeners need --tls-cert and --tls-key");
    }
  }
  for (const std::string& url : listen) bound_.push_back(server_->listen(util::parse_listen_url(url)));
}

void Daemon::refuse_unauthenticated_exposure() const {
  // Tools run commands for whoever reaches a listener: a port open to the
  // network without authentication is a mistake unless said out loud.
  if (config_.server.credentials.required()) return;
  for (const std::string& url : bound_) {
    if (loopback_listener(url)) continue;
    if (!config_.insecure_no_auth) {
      throw StartupError(url + " is reachable from other machines and no authentication is configured: "
                               "give --auth-token-file FILE or --auth-file FILE, listen on 127.0.0.1, or "
                               "pass --insecure-no-auth if every client that can reach it is trusted");
    }
    spdlog::warn("{}: listening without authentication (--insecure-no-auth)", url);
  }
}

void Daemon::watch_signals() {
  stop_signals_.async_wait([this](const boost::system::error_code& ec, int signo) { on_signal(ec, signo); });
  reload_signal_.async_wait([this](const boost::system::error_code& ec, int) { on_reload(ec); });
}

void Daemon::start_background_work() {
  // Evicts idle sessions and gives the memory they freed back to the OS.
  const auto period = std::clamp(config_.harness.session_idle / 4, std::chrono::milliseconds(10),
                                 std::chrono::milliseconds(1000));
  housekeeping_.emplace(control_, period, [this] {
    if (sessions_->evict_idle() > 0) ::malloc_trim(0);
  });
  housekeeping_->start();
  if (config_.stdio) {
    // The stdio client owns this process: when it is done, so is the daemon.
    server_->serve_stdio([this] { asio::post(control_, [this] { begin_stop(); }); });
  }
  // WATCHDOG=1 at half the interval systemd expects. It comes from the
  // control strand, so a wedged event loop stops it and systemd restarts us.
  if (const auto interval = util::systemd::watchdog_interval(); interval.count() > 0) {
    util::systemd::notify("WATCHDOG=1");
    watchdog_.emplace(control_, std::chrono::duration_cast<std::chrono::milliseconds>(interval / 2),
                      [] { util::systemd::notify("WATCHDOG=1"); });
    watchdog_->start();
  }
}

void Daemon::announce_ready() {
  if (!config_.ready_file.empty()) write_ready_file(config_.ready_file, bound_);
  // Every listener accepts from here on: systemd may send clients.
  util::systemd::notify("READY=1");
  const harness::HarnessOptions& options = config_.harness;
  spdlog::info("harnessd {} ready (store: {}{}, threads: {}, max open logs: {}, max running turns: {})",
               util::version, store_->kind(),
               store_->kind() == "jsonl" ? ", sync: " + std::string(store::to_string(config_.jsonl.sync)) : "",
               config_.threads,
               options.max_open_logs == std::numeric_limits<std::size_t>::max() ? std::string("unbounded")
                                                                                : std::to_string(options.max_open_logs),
               options.max_running_turns);
}

// --- stop ------------------------------------------------------------------

void Daemon::on_signal(const boost::system::error_code& ec, int signo) {
  if (ec) return;
  if (stopping_ || draining_) {
    spdlog::warn("signal {} again: exiting now", signo);
    forced_exit_ = true;
    io_.stop();
    return;
  }
  spdlog::info("signal {}: stopping", signo);
  begin_drain();
  stop_signals_.async_wait([this](const boost::system::error_code& e, int s) { on_signal(e, s); });
}

void Daemon::on_reload(const boost::system::error_code& ec) {
  // A SIGHUP whose handler was queued before on_connections_closed()
  // cancelled the wait must not arm it again: the event loop would never end.
  if (ec || connections_closed_) return;
  // A renewed certificate is used for new connections; a broken one is
  // logged and the old pair stays.
  if (tls_) {
    const std::string error = tls_->reload();
    if (error.empty()) {
      spdlog::info("SIGHUP: reloaded the TLS certificate {}", tls_->cert_file());
    } else {
      spdlog::error("SIGHUP: TLS certificate not reloaded, the old one stays: {}", error);
    }
  } else {
    spdlog::info("SIGHUP: nothing to reload (no --tls-cert)");
  }
  reload_signal_.async_wait([this](const boost::system::error_code& e, int) { on_reload(e); });
}

std::size_t Daemon::turns_in_flight() const {
  // Running, or admitted to wait for a slot.
  return sessions_->admission().running() + sessions_->admission().queued();
}

std::uint64_t Daemon::turns_ended() const {
  return sessions_->stats().total.load() - static_cast<std::uint64_t>(sessions_->stats().active.load());
}

void Daemon::begin_drain() {
  if (draining_ || stopping_) return;
  draining_ = true;
  util::systemd::notify("STOPPING=1");
  server_->drain();
  const std::size_t running = turns_in_flight();
  if (running == 0 || config_.drain_timeout.count() == 0) {
    if (running > 0) spdlog::info("drain: {} turn(s) running, cancelled at once (--drain-timeout-ms 0)", running);
    begin_stop();
    return;
  }
  spdlog::info("drain: no new connections or prompts; {} turn(s) running get up to {} ms to finish", running,
               config_.drain_timeout.count());
  drain_deadline_ = std::chrono::steady_clock::now() + config_.drain_timeout;
  ended_before_drain_ = turns_ended();
  check_drain({});
}

void Daemon::check_drain(const boost::system::error_code& ec) {
  // Every 20 ms until the turns are done or the deadline passes.
  if (ec || stopping_) return;
  const std::size_t left = turns_in_flight();
  const std::uint64_t finished = turns_ended() - ended_before_drain_;
  if (left == 0 || std::chrono::steady_clock::now() >= drain_deadline_) {
    spdlog::info("drain: {} turn(s) finished, {} cancelled", finished, left);
    begin_stop();
    return;
  }
  drain_timer_.expires_after(std::chrono::milliseconds(20));
  drain_timer_.async_wait([this](const boost::system::error_code& e) { check_drain(e); });
}

void Daemon::begin_stop() {
  if (stopping_) return;
  stopping_ = true;
  drain_timer_.cancel();
  grace_timer_.expires_after(config_.shutdown_grace);
  grace_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    spdlog::warn("connections did not settle within {} ms; exiting", config_.shutdown_grace.count());
    forced_exit_ = true;
    io_.stop();
  });
  // Once the last connection has closed nothing else is pending and the
  // I/O threads return.
  server_->stop([this] { asio::post(control_, [this] { on_connections_closed(); }); });
}

void Daemon::on_connections_closed() {
  connections_closed_ = true;
  grace_timer_.cancel();
  stop_signals_.cancel();
  reload_signal_.cancel();
  if (housekeeping_) housekeeping_->stop();
  if (watchdog_) watchdog_->stop();
  sessions_->kill_background_tasks();
  mcp_servers_->stop();
  store_->begin_stop();
}

void Daemon::finish() {
  store_->stop();
  spdlog::info("stopped");
}

}  // namespace harnessd
