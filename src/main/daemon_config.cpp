#include "daemon_config.hpp"
#include "store_kinds.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <iterator>


namespace harnessd {

namespace {

constexpr std::int64_t one_week_ms = std::int64_t{7} * 86'400'000;

/// A millisecond flag bound to a duration field; --help shows its value.
CLI::Option* add_ms(CLI::App& app, const std::string& name, std::chrono::milliseconds& target,
                    const std::string& help, std::int64_t min = 0, std::int64_t max = one_week_ms) {
  return app
      .add_option_function<std::int64_t>(
          name, [&target](std::int64_t ms) { target = std::chrono::milliseconds(ms); }, help)
      ->default_str(std::to_string(target.count()))
      ->check(CLI::Range(min, max));
}

}  // namespace

void add_flags(CLI::App& app, DaemonConfig& config) {
  // Every option bound to a field shows that field's value as its default.
  app.option_defaults()->always_capture_default();

  app.add_flag("--stdio", config.stdio, "Serve one client on stdin/stdout (NDJSON); exit when it is done");
  app.add_option("--listen", config.listen,
                 "Listen on tcp://HOST:PORT (NDJSON), ws://HOST:PORT (WebSocket + HTTP), or their TLS forms "
                 "tls:// and wss:// (with --tls-cert and --tls-key); repeatable; port 0 picks a free port. "
                 "Without --stdio or systemd sockets the default is ws://127.0.0.1:7878 and tcp://127.0.0.1:7879");
  app.add_option("--tls-cert", config.tls_cert,
                 "PEM certificate chain of wss:// and tls:// listeners; reloaded on SIGHUP");
  app.add_option("--tls-key", config.tls_key, "PEM private key of --tls-cert; reloaded on SIGHUP");
  app.add_option("--ready-file", config.ready_file,
                 "Once every listener is bound, write {\"listen\":[URL,...]} to this file");
  app.add_option("--threads", config.threads, "I/O threads (0: one per core)")->check(CLI::Range(0u, 256u));
  app.add_option("--session-root", config.session_root,
                 "Directory of the JSONL session logs (empty: $DSH_SESSION_ROOT, else ./.sessions)");
  std::string store_help = "Event store:";
  std::vector<std::string> store_names;
  for (const StoreKind& kind : store_kinds()) {
    store_help += fmt::format("{} {} ({})", store_names.empty() ? "" : ";", kind.name, kind.description);
    store_names.emplace_back(kind.name);
  }
  app.add_option("--store", config.store, store_help)->check(CLI::IsMember(store_names));

  // store
  app.add_option_function<std::string>(
         "--sync",
         [&config](const std::string& name) {
           for (const auto mode : {store::SyncMode::turn, store::SyncMode::batch, store::SyncMode::none}) {
             if (store::to_string(mode) == name) config.jsonl.sync = mode;
           }
         },
         "When session logs reach the disk: turn (every prompt is answered only after its turn is synced; "
         "many turns share one sync), batch (synced every --sync-interval-ms; answers do not wait), none "
         "(left to the OS). A daemon crash loses nothing in any mode")
      ->check(CLI::IsMember({"turn", "batch", "none"}))
      ->default_str(std::string(store::to_string(config.jsonl.sync)));
  add_ms(app, "--sync-interval-ms", config.jsonl.sync_interval, "With --sync batch: the sync period", 1, 60'000);
  app.add_option("--postgres-url", config.postgres.url,
                 "With --store postgres: the database, as a libpq URI or key=value string "
                 "(e.g. postgresql://harnessd@db/harnessd); empty: the PG* environment variables");
  app.add_option("--postgres-pool", config.postgres.pool_size,
                 "With --store postgres: connections per node (one commits, one listens for cancels from "
                 "other nodes, the rest read and take leases)")
      ->check(CLI::Range(std::size_t{3}, std::size_t{1000}));
  app.add_option("--node-id", config.postgres.node_id,
                 "With --store postgres: this node's name in session leases and in -32001 errors "
                 "(empty: HOSTNAME-PID)");
  add_ms(app, "--lease-ttl-ms", config.postgres.lease_ttl,
         "With --store postgres: a session's lease lasts this long unless renewed (every third of it while "
         "its turn runs); a dead node's sessions can be prompted elsewhere after it",
         100, 3'600'000);

  // harness
  add_ms(app, "--session-idle-ms", config.harness.session_idle,
         "Evict a session (close its log, free its memory) after this long without a prompt; its next "
         "prompt loads it again. With --store memory this ends the session: its events live nowhere else",
         1, 86'400'000);
  app.add_option("--max-open-logs", config.max_open_logs,
                 "Loaded sessions (one open log each) before the least recently used idle ones are evicted "
                 "(0: a quarter of the file descriptor limit); not with --store memory, whose sessions hold no "
                 "file and end only after --session-idle-ms");
  app.add_option("--max-running-turns", config.max_running_turns,
                 "Turns running at once; later prompts wait in line, a session's first prompt or one after a "
                 "pause of half a second ahead of busy sessions' (0: 4096, 256 with --store postgres, "
                 "or an eighth of the file descriptor limit if that is lower)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 20));
  app.add_option("--max-queued-turns", config.harness.max_queued_turns,
                 "Prompts waiting for a running slot; beyond it a prompt is refused with -32005 "
                 "\"server overloaded\" and data.retryAfterMs");
  app.add_option("--workspace-root", config.server.workspace_root,
                 "Network clients' workspaces: initialize.cwd is taken relative to it and must stay inside; "
                 "without a cwd each session gets ROOT/SESSION_ID (with --auth-file: ROOT/PRINCIPAL/...). "
                 "Empty: \"workspaces\" beside the session root");
  app.add_flag("--check-sandbox", config.check_sandbox,
               "Print what confines the bash tool on this host (bubblewrap, namespaces, network isolation, "
               "limits) and exit: 0 when bash can run confined, 1 when it fails closed (SANDBOX_UNAVAILABLE)");
  app.add_flag("--allow-full-access", config.server.allow_full_access,
               "Let network clients ask for sandbox \"danger-full-access\" (tools unconfined; stdio clients "
               "may always)");
  app.add_option_function<std::string>(
         "--sandbox-network", [&config](const std::string& v) { config.harness.sandbox.network = v == "on"; },
         "Whether bash in the workspace-write and read-only sandboxes may use the network")
      ->check(CLI::IsMember({"on", "off"}))
      ->default_str("off");
  app.add_option_function<std::string>(
         "--web-fetch", [&config](const std::string& v) { config.harness.sandbox.web_fetch = v == "on"; },
         "Offer the model the web_fetch tool (http/https GET from this daemon's network position; loopback, "
         "private, link-local and metadata addresses refused on every hop)")
      ->check(CLI::IsMember({"on", "off"}))
      ->default_str("off");
  app.add_flag("--web-fetch-allow-private", config.harness.sandbox.web_fetch_allow_private,
               "Let web_fetch reach loopback, private and link-local addresses too");
  app.add_option_function<std::string>(
         "--approval-policy",
         [&config](const std::string& v) { config.server.approval_policy = protocol::parse_approval_policy(v); },
         "Default initialize.approvalPolicy for every listener: \"ask\" makes each tool call that may change "
         "something wait for a client's session/approve; unset: \"never\" on stdio, \"ask\" on network "
         "listeners")
      ->check(CLI::IsMember({"never", "ask"}));
  app.add_option("--context-window", config.server.context_window,
                 "Default initialize.contextWindow in tokens: a session whose next request would fill 80 % of it "
                 "is compacted (older messages summarized by its own model) first. Unset: the provider "
                 "profile's window for the model, else the catalog's (deepseek-chat 128000, deepseek-v4-flash "
                 "256000, ...), else 128000; a profile's models table wins over this flag")
      ->check(CLI::Range(std::int64_t{1000}, std::int64_t{100'000'000}));
  add_ms(app, "--approval-timeout-ms", config.harness.approval_timeout,
         "How long a tool call waits for an approval (then it is rejected) and ask_user_question for an "
         "answer",
         1);
  app.add_option("--tool-threads", config.harness.tool_threads,
                 "Threads for tools' blocking work (file reads, tree walks), apart from the I/O threads")
      ->check(CLI::Range(1u, 64u));
  app.add_flag("--max-tokens-as-success", config.harness.max_tokens_as_success,
               "Report turns that stop at the token limit as status ok instead of error");
  app.add_option("--max-turn-bytes", config.harness.max_turn_bytes,
                 "Bytes of events one turn may write (its chunks and messages, as logged); past it the turn "
                 "ends with error code TURN_TOO_LARGE")
      ->check(CLI::Range(std::size_t{64} << 10, std::size_t{1} << 40));

  // server
  app.add_option("--provider", config.server.default_provider, "Provider of clients that name none in initialize");
  app.add_option("--max-frame-bytes", config.server.max_frame_bytes, "Largest accepted message in bytes")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30));
  app.add_option("--max-response-bytes-per-connection", config.server.max_response_bytes_per_connection,
                 "Bytes of built answers (session/events pages, replayed events) one connection may hold "
                 "unwritten; more requests wait for them to drain, then get -32005")
      ->check(CLI::Range(std::size_t{1} << 20, std::size_t{1} << 40));
  app.add_option("--max-response-bytes", config.server.max_response_bytes,
                 "Bytes of built answers all connections together may hold unwritten")
      ->check(CLI::Range(std::size_t{1} << 20, std::size_t{1} << 42));
  app.add_option("--subscriber-max-bytes", config.server.subscriber_max_bytes,
                 "Close a connection with more bytes of subscribed session events queued than this "
                 "(session/subscribe never slows a turn)")
      ->check(CLI::Range(std::size_t{64 * 1024}, std::size_t{1} << 34));
  add_ms(app, "--subscriber-linger-ms", config.server.subscriber_linger,
         "Subscribed events wait this long to share one write per connection (0: written at once)", 0, 1000);
  app.add_option("--max-subscriptions", config.server.max_subscriptions,
                 "Sessions one connection may subscribe to at once")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  add_ms(app, "--write-timeout-ms", config.server.write_timeout,
         "Close a client that accepts no bytes for this long while output waits");
  add_ms(app, "--handshake-timeout-ms", config.server.handshake_timeout,
         "Close a network client that has not initialized (and authenticated) by then", 1, 3'600'000);
  add_ms(app, "--idle-timeout-ms", config.server.idle_timeout,
         "Close a network client that sends no request and runs no prompt for this long (0: never)");
  add_ms(app, "--drain-timeout-ms", config.drain_timeout,
         "On SIGINT/SIGTERM, stop taking new connections and prompts, and give running turns this long to "
         "finish before they are cancelled (0: cancel at once); /healthz answers 503 meanwhile");
  add_ms(app, "--shutdown-grace-ms", config.shutdown_grace,
         "After the drain, wait this long for cancelled turns to settle and connections to close before exiting");
  app.add_option("--auth-token-file", config.auth_token_file,
                 "Require the bearer token in this file (first line) from network clients: WebSocket upgrade "
                 "(Authorization: Bearer or ?access_token=) and TCP (initialize authToken). One principal, "
                 "that sees every session");
  app.add_option("--auth-file", config.auth_file,
                 "Principals and their tokens, TOML: [principals.NAME] token = \"sha256:HEX\" (sha256 of the "
                 "token: printf %s TOKEN | sha256sum), admin = true|false. Each principal sees only the "
                 "sessions it created; an admin sees all")
      ->excludes("--auth-token-file");
  app.add_flag("--insecure-no-auth", config.insecure_no_auth,
               "Allow listening on a non-loopback address without --auth-token-file or --auth-file (anyone who "
               "reaches the port can run prompts)");
  app.add_option("--allow-host", config.server.allowed_hosts,
                 "Also serve HTTP and WebSocket requests whose Host header names this host (repeatable; any "
                 "port). Loopback names and the address a client connected to are always served; other "
                 "Host values get 421, which stops DNS rebinding");
  app.add_option("--max-connections", config.server.max_connections,
                 "Open network connections at once; more are closed at accept (0: half the file descriptor "
                 "limit)");
  app.add_option("--max-connections-per-ip", config.server.max_connections_per_ip,
                 "Open network connections from one non-loopback client address (0: no limit)");
  app.add_option("--allow-origin", config.server.allowed_origins,
                 "Allow WebSocket upgrades from this Origin (repeatable); same-origin and Origin-less "
                 "clients are always allowed");
  add_ms(app, "--ws-idle-timeout-ms", config.server.ws_idle_timeout,
         "Ping idle WebSocket clients and close those silent for this long");
  app.add_flag("--ws-deflate", config.server.ws_deflate, "Enable permessage-deflate on WebSocket");
  app.add_option("--ws-deflate-threshold", config.server.ws_deflate_threshold,
                 "With --ws-deflate, compress messages of at least this many bytes");

  // deepseek
  app.add_option("--system-prompt", config.harness.persona,
                 "The persona section of every request's system prompt, a template: {{model}} and {{cwd}} are "
                 "replaced (it follows the daemon's identity and precedes each offered tool's guidance)");
  app.add_option_function<std::string>(
         "--system-prompt-file",
         [&config](const std::string& path) {
           std::ifstream in(path);
           if (!in) throw CLI::ValidationError("--system-prompt-file", "cannot read " + path);
           config.harness.persona.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
         },
         "--system-prompt from a file")
      ->excludes("--system-prompt");
  add_ms(app, "--model-connect-timeout-ms", config.deepseek.connect_timeout,
         "deepseek: connect + TLS handshake deadline");
  add_ms(app, "--model-first-byte-timeout-ms", config.deepseek.first_byte_timeout,
         "deepseek: deadline for the response headers");
  add_ms(app, "--model-idle-timeout-ms", config.deepseek.idle_timeout, "deepseek: longest silence inside a stream");
  app.add_option("--model-attempts", config.deepseek.max_attempts,
                 "deepseek: tries for 429/5xx/connect failures before anything streamed")
      ->check(CLI::Range(1, 10));
  add_ms(app, "--model-retry-delay-ms", config.deepseek.retry_base_delay,
         "deepseek: first retry delay, doubled per attempt");

  app.add_option("--log-level", config.log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
}

}  // namespace harnessd
