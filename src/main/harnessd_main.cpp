// harnessd: serves LLM agent sessions over directional JSON-RPC 2.0 on
// stdio, TCP and WebSocket. This file only wires flags to the layers.
#include "config_file.hpp"
#include "daemon.hpp"
#include "daemon_config.hpp"
#include "heap_tuning.hpp"
#include "tools/sandbox.hpp"
#include "util/version.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>

using namespace harnessd;

int main(int argc, char** argv) {
  tune_heap();
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
    Daemon daemon(std::move(config));
    return daemon.run();
  } catch (const StartupError& e) {
    std::fprintf(stderr, "harnessd: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "harnessd: %s\n", e.what());
    return 1;
  }
}
