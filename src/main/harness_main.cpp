// harness: the command-line client of harnessd. Runs one turn (`prompt`) or a
// conversation (`chat`) against a spawned `harnessd --stdio` or a daemon at a
// tcp:// or ws:// URL, streaming the assistant's text as it arrives.
#include "harnessd/client/client.hpp"
#include "harnessd/client/harness.hpp"
#include "util/version.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>

#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace harnessd::client;

enum ExitCode : int { exit_ok = 0, exit_error = 1, exit_aborted = 2, exit_connection = 3 };

enum class Mode { prompt, chat };

struct Options {
  std::string connect;
  bool spawn = false;
  std::string harnessd;
  std::vector<std::string> daemon_args;
  std::string session;
  bool json = false;
  std::string provider;
  std::string model;
  std::string token;
  bool verbose = false;
  std::vector<std::string> words;
};

/// Everything the command, the signal watcher and the stdin reader share.
/// Single-threaded: all of it runs on the one io_context thread.
struct Cli {
  Cli(asio::io_context& io, Options options, Mode mode)
      : io(io), options(std::move(options)), mode(mode), signals(io, SIGINT, SIGTERM), input(io) {}

  asio::io_context& io;
  Options options;
  Mode mode;
  asio::signal_set signals;
  asio::posix::stream_descriptor input;
  std::optional<Client> client;
  bool turn_running = false;
  bool quitting = false;
  int interrupts = 0;  // Ctrl-C presses since the current turn (or line) began
  // Output of the running turn (text mode).
  bool printed_text = false;
  char last_char = '\n';
};

std::string random_session_id() {
  std::random_device rd;
  std::uniform_int_distribution<unsigned> dist(0, 0xffff);
  char buf[32];
  std::snprintf(buf, sizeof buf, "cli-%04x%04x", dist(rd), dist(rd));
  return buf;
}

/// `harnessd` next to this executable, else whatever PATH finds.
std::string default_harnessd() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path sibling = self.parent_path() / "harnessd";
    if (::access(sibling.c_str(), X_OK) == 0) return sibling.string();
  }
  return "harnessd";
}

void write_stdout(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

std::string field_or(const json::object& obj, std::string_view key, std::string fallback) {
  const json::value* v = obj.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : fallback;
}

/// "[ok]", "[error: MESSAGE]" or "[aborted: REASON]".
std::string status_line(const TurnResult& result) {
  if (result.status == "ok") return "[ok]";
  const std::string kind = field_or(result.reason, "kind", "?");
  if (result.status == "aborted") return "[aborted: " + field_or(result.reason, "reason", kind) + "]";
  return "[error: " + field_or(result.reason, "message", kind) + "]";
}

void on_notification(Cli& cli, const Notification& n) {
  if (cli.options.json) {
    write_stdout(n.raw + "\n");
    return;
  }
  if (std::optional<std::string_view> text = text_delta_of(n, cli.options.session)) {
    if (text->empty()) return;
    write_stdout(*text);
    cli.printed_text = true;
    cli.last_char = text->back();
  }
}

/// One turn: stream it, print the status line, return the exit code.
asio::awaitable<int> run_turn(Cli& cli, std::string text) {
  cli.turn_running = true;
  cli.interrupts = 0;
  cli.printed_text = false;
  cli.last_char = '\n';
  Harness harness(*cli.client);
  TurnResult result;
  int failed = -1;
  try {
    NotificationHandler handler = [&cli](const Notification& n) { on_notification(cli, n); };
    std::string session = cli.options.session;
    result = co_await harness.run(std::move(session), std::move(text), std::move(handler));
  } catch (const RpcError& e) {
    if (cli.options.json && !e.raw_response().empty()) write_stdout(e.raw_response() + "\n");
    std::fprintf(stderr, "[error: %s (code %d)]\n", e.what(), e.code());
    failed = exit_error;
  } catch (const TransportClosed& e) {
    if (cli.quitting) {
      std::fprintf(stderr, "\n[aborted: quit]\n");
      failed = exit_aborted;
    } else {
      std::fprintf(stderr, "\nharness: connection lost: %s\n", e.what());
      failed = exit_connection;
    }
  } catch (const ClientError& e) {
    std::fprintf(stderr, "\nharness: %s\n", e.what());
    failed = exit_connection;
  }
  cli.turn_running = false;
  if (failed >= 0) co_return failed;

  if (cli.options.json) {
    write_stdout(result.raw_response + "\n");
  } else {
    if (!cli.printed_text && !result.final_response.empty()) {
      write_stdout(result.final_response);
      cli.printed_text = true;
      cli.last_char = result.final_response.back();
    }
    if (cli.printed_text && cli.last_char != '\n') write_stdout("\n");
  }
  if (cli.mode == Mode::prompt || result.status != "ok") {
    std::fprintf(stderr, "%s\n", status_line(result).c_str());
  }
  if (result.status == "ok") co_return exit_ok;
  if (result.status == "aborted") co_return exit_aborted;
  co_return exit_error;
}

asio::awaitable<int> chat_loop(Cli& cli) {
  const bool tty = ::isatty(STDIN_FILENO) != 0;
  if (tty) std::fprintf(stderr, "session %s. Ctrl-C cancels a turn, Ctrl-D quits.\n", cli.options.session.c_str());
  std::string buffer;
  bool eof = false;
  while (!eof && !cli.quitting) {
    if (tty) std::fputs("> ", stderr);
    boost::system::error_code ec;
    const std::size_t n = co_await asio::async_read_until(cli.input, asio::dynamic_buffer(buffer), '\n',
                                                          asio::redirect_error(asio::use_awaitable, ec));
    if (cli.quitting) break;
    std::string line;
    if (ec) {
      eof = true;  // EOF (or an unreadable stdin): a last unterminated line still counts
      line = std::move(buffer);
    } else {
      line = buffer.substr(0, n - 1);
      buffer.erase(0, n);
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const int rc = co_await run_turn(cli, std::move(line));
    if (rc == exit_connection) co_return exit_connection;
  }
  if (tty && !cli.quitting) std::fputs("\n", stderr);
  co_return exit_ok;
}

asio::awaitable<int> run_command(Cli& cli) {
  const asio::any_io_executor executor = cli.io.get_executor();
  std::unique_ptr<ClientTransport> transport;
  std::string failure;
  std::string where;
  try {
    if (!cli.options.connect.empty()) {
      std::string url = cli.options.connect;
      where = url;
      if (url.starts_with("ws://") && !cli.options.token.empty() && url.find("access_token=") == std::string::npos) {
        if (url.find('/', 5) == std::string::npos) url += '/';
        url += (url.find('?') == std::string::npos ? "?access_token=" : "&access_token=") + cli.options.token;
      }
      transport = co_await connect_url(executor, std::move(url));
    } else {
      SpawnOptions spawn;
      spawn.program = cli.options.harnessd.empty() ? default_harnessd() : cli.options.harnessd;
      where = spawn.program;
      spawn.args = {"--log-level", cli.options.verbose ? "info" : "warn"};
      spawn.args.insert(spawn.args.end(), cli.options.daemon_args.begin(), cli.options.daemon_args.end());
      transport = spawn_stdio(executor, spawn);
    }
  } catch (const boost::system::system_error& e) {
    failure = e.code().message();  // what() carries Asio's source location
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!transport) {
    std::fprintf(stderr, "harness: cannot connect to %s: %s\n", where.c_str(), failure.c_str());
    co_return exit_connection;
  }
  cli.client.emplace(executor, std::move(transport));
  if (cli.quitting) {
    co_await cli.client->close();
    co_return exit_aborted;
  }

  InitializeOptions init;
  init.client_name = "harness";
  init.client_version = std::string(harnessd::util::version);
  if (!cli.options.provider.empty()) init.provider = cli.options.provider;
  if (!cli.options.model.empty()) init.model = cli.options.model;
  if (!cli.options.token.empty() && cli.options.connect.starts_with("tcp://")) init.auth_token = cli.options.token;
  try {
    co_await cli.client->initialize(std::move(init));
  } catch (const std::exception& e) {
    failure = e.what();
  }
  int rc = exit_connection;
  if (!failure.empty()) {
    if (!cli.quitting) std::fprintf(stderr, "harness: initialize failed: %s\n", failure.c_str());
  } else if (cli.mode == Mode::prompt) {
    std::string text;
    for (const std::string& word : cli.options.words) text += (text.empty() ? "" : " ") + word;
    if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    rc = co_await run_turn(cli, std::move(text));
  } else {
    rc = co_await chat_loop(cli);
  }
  co_await cli.client->close();
  co_return rc;
}

asio::awaitable<void> close_client(Cli& cli) { co_await cli.client->close(); }

/// Ctrl-C: the first cancels the running turn through session/cancel, the
/// second quits. At the chat prompt the first only explains that.
asio::awaitable<void> watch_signals(Cli& cli) {
  for (;;) {
    boost::system::error_code ec;
    const int signo = co_await cli.signals.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    ++cli.interrupts;
    if (signo == SIGINT && cli.interrupts == 1 && cli.client && !cli.client->closed()) {
      if (cli.turn_running) {
        std::fprintf(stderr, "\n^C cancelling the turn (Ctrl-C again to quit)\n");
        std::string session = cli.options.session;
        try {
          co_await cli.client->session_cancel(std::move(session));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "harness: cancel failed: %s\n", e.what());
        }
        continue;
      }
      if (cli.mode == Mode::chat) {
        std::fputs("\n(Ctrl-C again or Ctrl-D to quit)\n> ", stderr);
        continue;
      }
    }
    if (cli.quitting) std::_Exit(exit_aborted);  // a third signal: do not wait for a graceful close
    cli.quitting = true;
    boost::system::error_code ignored;
    cli.input.cancel(ignored);
    cli.input.close(ignored);
    if (cli.client) asio::co_spawn(cli.io, close_client(cli), asio::detached);
  }
}

void add_connection_options(CLI::App* cmd, Options& o) {
  auto* connect = cmd->add_option("--connect", o.connect,
                                  "Daemon to use: tcp://HOST:PORT or ws://HOST:PORT[/?access_token=TOKEN]");
  auto* spawn = cmd->add_flag("--spawn", o.spawn,
                              "Start a private `harnessd --stdio` for this command (the default without --connect)");
  connect->excludes(spawn);
  cmd->add_option("--harnessd", o.harnessd,
                  "Daemon binary for --spawn (default: the harnessd next to harness, else PATH)")
      ->excludes(connect);
  cmd->add_option("--daemon-arg", o.daemon_args,
                  "Extra argument for the spawned daemon, repeatable (e.g. --daemon-arg=--store --daemon-arg=memory)")
      ->allow_extra_args(false);
  cmd->add_option("--session", o.session, "Session id (default: a fresh cli-XXXXXXXX); reuse one to continue it");
  cmd->add_flag("--json", o.json,
                "Print every notification and the final response as one JSON line each, instead of text");
  cmd->add_option("--provider", o.provider, "Provider for initialize (scripted, deepseek, ...)");
  cmd->add_option("--model", o.model, "Model for initialize");
  cmd->add_option("--token", o.token, "Auth token: initialize authToken on tcp://, ?access_token= on ws://");
  cmd->add_flag("-v,--verbose", o.verbose, "Debug logs of the client (and info logs of a spawned daemon) on stderr");
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  Options options;
  CLI::App app{
      "harness: command-line client of harnessd. Sends a prompt, streams the assistant's\n"
      "text to stdout as it arrives and prints the turn's status to stderr.\n\n"
      "Examples:\n"
      "  harness prompt \"hello\"                          # spawn a private harnessd --stdio\n"
      "  harness prompt --connect tcp://127.0.0.1:7879 --session demo \"what next?\"\n"
      "  harness prompt --connect ws://127.0.0.1:7878 --json \"@chunks 3 4\"\n"
      "  harness prompt --spawn --harnessd ./build/harnessd --daemon-arg=--store --daemon-arg=memory hi\n"
      "  echo \"long question\" | harness prompt -          # read the prompt from stdin\n"
      "  harness chat --session demo                     # one line per turn; Ctrl-C cancels, Ctrl-D quits\n"
      "  printf 'hi\\nbye\\n' | harness chat                 # scripted conversation\n\n"
      "Exit status: 0 ok, 1 error (turn error or error response), 2 aborted (cancelled),\n"
      "3 connection or usage error.",
      "harness"};
  app.set_version_flag("--version", std::string("harness ") + std::string(harnessd::util::version));
  app.require_subcommand(1);

  CLI::App* prompt = app.add_subcommand("prompt", "Run one turn and exit with its status");
  add_connection_options(prompt, options);
  prompt->add_option("text", options.words, "The prompt (several words are joined by spaces; - reads stdin)")
      ->required();
  prompt->footer(
      "Output: assistant text (text-delta chunks) on stdout, then [ok], [error: MESSAGE] or\n"
      "[aborted: REASON] on stderr. Ctrl-C sends session/cancel; a second Ctrl-C quits.\n"
      "Prompts starting with '-' need `--` first: harness prompt -- -x.");

  CLI::App* chat = app.add_subcommand("chat", "Interactive conversation: each stdin line is one turn");
  add_connection_options(chat, options);
  chat->footer(
      "Each line read from stdin is sent as a turn of the same session; answers stream to\n"
      "stdout. Ctrl-C cancels the running turn (session/cancel), a second Ctrl-C quits;\n"
      "EOF (Ctrl-D) quits.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? exit_ok : exit_connection;
  }

  auto logger = spdlog::stderr_color_mt("harness");
  spdlog::set_default_logger(logger);
  spdlog::set_level(options.verbose ? spdlog::level::debug : spdlog::level::warn);
  if (options.session.empty()) options.session = random_session_id();

  asio::io_context io(1);
  Cli cli(io, options, chat->parsed() ? Mode::chat : Mode::prompt);
  if (cli.mode == Mode::chat) {
    const int in = ::dup(STDIN_FILENO);
    if (in < 0) {
      std::perror("harness: stdin");
      return exit_connection;
    }
    cli.input.assign(in);
  }
  int code = exit_connection;
  asio::co_spawn(io, run_command(cli), [&](std::exception_ptr error, int rc) {
    code = rc;
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "harness: %s\n", e.what());
      }
      code = exit_connection;
    }
    boost::system::error_code ignored;
    cli.signals.cancel(ignored);
  });
  asio::co_spawn(io, watch_signals(cli), asio::detached);
  io.run();
  cli.client.reset();
  return code;
}
