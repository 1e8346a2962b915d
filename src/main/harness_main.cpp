// harness: the command-line client of harnessd. Runs one turn (`prompt`) or a
// conversation (`chat`) against a spawned `harnessd --stdio` or a daemon at a
// tcp:// or ws:// URL, streaming the assistant's text as it arrives; lists the
// daemon's sessions (`sessions`), prints a session's transcript (`log`, with
// `--follow` to keep printing live events) and follows a running turn to its
// end (`attach`). Tool calls that wait for an approval, and questions of the
// model, are asked on the terminal or settled by --approve.
#include "harnessd/client/client.hpp"
#include "harnessd/client/harness.hpp"
#include "util/version.hpp"
#include "util/wakeup.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <deque>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <unordered_set>

#include <fcntl.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace harnessd::client;

enum ExitCode : int { exit_ok = 0, exit_error = 1, exit_aborted = 2, exit_connection = 3 };

enum class Mode { prompt, chat, sessions, log, attach };

/// Page size of the history reads (the daemon's maximum).
constexpr std::int64_t events_page = 1000;

struct Options {
  std::string connect;
  bool spawn = false;
  std::string harnessd;
  std::vector<std::string> daemon_args;
  std::string session;
  bool json = false;
  std::string provider;
  std::string model;
  std::string token;  ///< --token, else --token-file's first line, else $HARNESSD_TOKEN
  std::string token_file;
  std::string ca_file;            // --ca-file: trusted CAs for tls:// and wss://
  bool insecure = false;          // --insecure: no certificate verification (testing only)
  int verbose = 0;                ///< -v: tool results' text; -vv: also debug logs
  std::string on_disconnect;  // "", "cancel" or "continue"
  std::vector<std::string> words;
  bool follow = false;            // log --follow
  std::int64_t page_size = 100;   // sessions --page-size
  std::string approve;            // --approve: "", "all" or "none"
  std::string approval_policy;    // --approval-policy: "", "never" or "ask"
};

/// The console output of turns: text that streams in, then a line break
/// before anything else is printed.
struct TextOut {
  bool printed_text = false;
  char last_char = '\n';

  void text(std::string_view piece) {
    if (piece.empty()) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    printed_text = true;
    last_char = piece.back();
  }
  /// Ends a partly written line.
  void end_line() {
    if (last_char != '\n') text("\n");
  }
};

/// The tool calls of the running turn, one line each on stderr: "⚙ NAME
/// WHAT" when called, then " ✓" or " ✗ CODE" on the same line when its
/// result comes (the whole line again when other lines came between); with
/// -v the result's text follows, indented and folded to `fold_lines` lines.
struct ToolLines {
  static constexpr std::size_t fold_lines = 20;
  std::map<std::string, std::string> labels;  // callId -> "NAME WHAT"
  std::string open_call;                      // the call whose line waits for its mark

  /// Ends the line of a call still waiting for its result.
  void close() {
    if (open_call.empty()) return;
    std::fputs("\n", stderr);
    std::fflush(stderr);
    open_call.clear();
  }
};

/// Where a transcript (log, attach) stands.
struct Transcript {
  std::int64_t last_seq = -1;   // the last event handled; older ones are skipped
  bool step_text = false;       // a text-delta of the current step was printed
  std::optional<std::int64_t> end_after;  // attach: the first turn/end after this seq ends it
  bool ended = false;
  std::string end_status;       // "ok", "error" or "aborted"
  json::object end_reason;
};

/// An approval or a question the running turn waits for, in arrival order.
struct PendingDecision {
  std::string session_id;  // the session whose turn waits (a subagent's child session too)
  std::optional<harnessd::protocol::ApprovalRequested> approval;
  std::optional<harnessd::protocol::QuestionRequested> question;

  const std::string& id() const { return approval ? approval->approval_id : question->question_id; }
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
  TextOut out;         // output of the running turn (text mode)
  ToolLines tools;     // its tool calls (text mode, on stderr)
  Transcript transcript;
  // log --follow, attach: woken by events, signals and the end of the connection.
  std::shared_ptr<harnessd::util::Wakeup> wake = harnessd::util::Wakeup::create(io.get_executor());
  // Decisions: asked one at a time on the terminal (/dev/tty, opened when
  // first needed), or settled by --approve.
  std::deque<PendingDecision> decisions;
  bool deciding = false;
  std::unordered_set<std::string> settled;  // ids whose resolved event came
  std::string asking;                       // the id whose question is on the terminal now
  std::optional<asio::posix::stream_descriptor> tty;
  std::string tty_buffer;
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
std::string status_line(std::string_view status, const json::object& reason) {
  if (status == "ok") return "[ok]";
  const std::string kind = field_or(reason, "kind", "?");
  if (status == "aborted") return "[aborted: " + field_or(reason, "reason", kind) + "]";
  return "[error: " + field_or(reason, "message", kind) + "]";
}

/// The status a prompt gets for a turn that ended with `reason` (protocol
/// §4.2; a daemon with --max-tokens-as-success reports max-tokens as ok, which
/// its log does not show).
std::string status_of(const json::object& reason) {
  const std::string kind = field_or(reason, "kind", "");
  if (kind == "completed") return "ok";
  if (kind == "aborted") return "aborted";
  return "error";
}

int exit_code_of(std::string_view status) {
  if (status == "ok") return exit_ok;
  if (status == "aborted") return exit_aborted;
  return exit_error;
}

// ---------------------------------------------------------------------------
// Transcripts: session events as a reader sees them

const json::object& object_or_empty(const json::object& obj, std::string_view key) {
  static const json::object empty;
  const json::value* v = obj.if_contains(key);
  return v != nullptr && v->is_object() ? v->get_object() : empty;
}

/// The events of a session/events page as objects (the page holds each as
/// the log's JSON text).
std::vector<json::object> events_of(const harnessd::protocol::EventsResult& page) {
  std::vector<json::object> events;
  events.reserve(page.events.size());
  for (const std::string& text : page.events) events.push_back(json::parse(text).as_object());
  return events;
}

std::optional<std::int64_t> seq_of(const json::object& event) {
  const json::value* v = event.if_contains("seq");
  if (v != nullptr && v->is_int64()) return v->get_int64();
  return std::nullopt;
}

/// Concatenated text of the `type` blocks of an event's content.
std::string blocks_text(const json::object& data, std::string_view type) {
  std::string text;
  const json::value* content = data.if_contains("content");
  if (content == nullptr || !content->is_array()) return text;
  for (const json::value& block : content->get_array()) {
    const json::object* b = block.if_object();
    if (b != nullptr && field_or(*b, "type", "") == type) text += field_or(*b, "text", "");
  }
  return text;
}

/// `text` cut to at most `max` bytes on a UTF-8 character boundary, "…" added when cut.
std::string clip(std::string text, std::size_t max) {
  if (text.size() <= max) return text;
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) --cut;
  text.resize(cut);
  return text + "…";
}

std::string first_line(std::string_view text) {
  return std::string(text.substr(0, text.find('\n')));
}

/// What a tool call works on, for its line: "write notes/a.txt", "bash: echo hi".
std::string tool_label(const std::string& name, std::string_view arguments) {
  boost::system::error_code ec;
  const json::value parsed = json::parse(arguments, ec);
  const json::object* args = ec ? nullptr : parsed.if_object();
  std::string label = name;
  if (args != nullptr) {
    const auto str = [&](std::string_view key) { return first_line(field_or(*args, key, "")); };
    if (name == "bash") {
      label += ": " + str("command");
    } else if (name == "read" || name == "write" || name == "edit") {
      label += " " + str("file_path");
    } else if (name == "glob" || name == "grep") {
      label += " " + str("pattern");
      if (const std::string path = str("path"); !path.empty()) label += " in " + path;
    } else if (name == "task_output" || name == "task_kill") {
      label += " " + str("task_id");
    } else if (name == "subagent") {
      label += ": " + str("description");
    } else if (const json::value* todos = args->if_contains("todos"); name == "todo_write" && todos != nullptr &&
                                                                      todos->is_array()) {
      const std::size_t n = todos->get_array().size();
      label += " (" + std::to_string(n) + (n == 1 ? " item)" : " items)");
    } else if (!args->empty()) {
      label += " " + json::serialize(*args);
    }
  } else if (!arguments.empty()) {
    label += " " + first_line(arguments);
  }
  return clip(std::move(label), 160);
}

/// The result text, indented, at most ToolLines::fold_lines lines.
std::string folded_result(std::string_view text) {
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (text.empty()) return "    (no output)\n";
  std::string out;
  std::size_t lines = 0;
  std::size_t at = 0;
  while (at != std::string_view::npos) {
    const std::size_t nl = text.find('\n', at);
    const std::string_view line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    at = nl == std::string_view::npos ? nl : nl + 1;
    if (++lines <= ToolLines::fold_lines) out += "    " + clip(std::string(line), 2000) + "\n";
  }
  if (lines > ToolLines::fold_lines) {
    out += "    … " + std::to_string(lines - ToolLines::fold_lines) + " more lines (" +
           std::to_string(lines) + " in all)\n";
  }
  return out;
}

/// A tool/call or tool/result event of the running turn, as lines on stderr.
void print_tool_event(Cli& cli, const std::string& type, const json::object& data) {
  ToolLines& tools = cli.tools;
  const std::string call_id = field_or(data, "callId", "");
  // On a terminal the answer so far ends its line first (stdout and stderr share it).
  if (::isatty(STDOUT_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1) cli.out.end_line();
  if (type == "tool/call") {
    tools.close();
    std::string label = tool_label(field_or(data, "name", "tool"), field_or(data, "arguments", ""));
    std::fprintf(stderr, "⚙ %s", label.c_str());
    std::fflush(stderr);
    tools.labels[call_id] = std::move(label);
    tools.open_call = call_id;
    return;
  }
  const json::value* is_error = data.if_contains("isError");
  const bool failed = is_error != nullptr && is_error->is_bool() && is_error->get_bool();
  const json::object& meta = object_or_empty(data, "meta");
  std::string mark = "✓";
  if (failed) {
    const json::object& error = object_or_empty(data, "error");
    mark = "✗ " + field_or(error, "code", "error");
  } else if (const json::value* timed_out = meta.if_contains("timedOut");
             timed_out != nullptr && timed_out->is_bool() && timed_out->get_bool()) {
    mark = "✗ timed out";
  } else if (const json::value* exit_code = meta.if_contains("exitCode");
             exit_code != nullptr && exit_code->is_int64() && exit_code->get_int64() != 0) {
    mark = "✗ exit " + std::to_string(exit_code->get_int64());
  }
  if (!tools.open_call.empty() && tools.open_call == call_id) {
    std::fprintf(stderr, " %s\n", mark.c_str());
    tools.open_call.clear();
  } else {
    tools.close();
    const auto label = tools.labels.find(call_id);
    std::fprintf(stderr, "⚙ %s %s\n", label != tools.labels.end() ? label->second.c_str() : "tool", mark.c_str());
  }
  if (cli.options.verbose >= 1) std::fputs(folded_result(blocks_text(data, "text")).c_str(), stderr);
  std::fflush(stderr);
}

// ---- approvals and questions ------------------------------------------------

namespace protocol = harnessd::protocol;

/// Model-chosen text made safe for a terminal: control characters (escape
/// sequences included) become '?', except newlines when `keep_newlines`.
std::string printable(std::string_view text, bool keep_newlines = false) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && !(keep_newlines && c == '\n')) || byte == 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  return out;
}

/// The terminal the person running harness sits at, when stdin is one:
/// /dev/tty, else stdin itself (a terminal that is not the controlling one).
/// Its own descriptor, so chat's reader of stdin keeps its buffer.
bool have_terminal(Cli& cli) {
  if (cli.tty) return true;
  if (::isatty(STDIN_FILENO) != 1) return false;
  int fd = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) fd = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return false;
  cli.tty.emplace(cli.io, fd);
  return true;
}

void tty_write(Cli& cli, std::string_view text) {
  std::fflush(stdout);
  std::fflush(stderr);
  boost::system::error_code ec;
  asio::write(*cli.tty, asio::buffer(text), ec);
}

/// One line typed at the terminal; nullopt on EOF, or when the decision
/// asked about was settled elsewhere meanwhile (the read is cancelled then).
asio::awaitable<std::optional<std::string>> tty_line(Cli& cli) {
  boost::system::error_code ec;
  const std::size_t n = co_await asio::async_read_until(*cli.tty, asio::dynamic_buffer(cli.tty_buffer), '\n',
                                                        asio::redirect_error(asio::use_awaitable, ec));
  if (ec || (!cli.asking.empty() && cli.settled.contains(cli.asking))) co_return std::nullopt;
  std::string line = cli.tty_buffer.substr(0, n - 1);
  cli.tty_buffer.erase(0, n);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  co_return line;
}

std::string trimmed(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return std::string(text.substr(first, text.find_last_not_of(" \t") - first + 1));
}

/// What a write or edit would change, as -/+ lines (at most 20), else "".
std::string change_preview(const protocol::ApprovalRequested& req) {
  boost::system::error_code ec;
  const json::value parsed = json::parse(req.arguments, ec);
  const json::object* args = ec ? nullptr : parsed.if_object();
  if (args == nullptr) return {};
  std::vector<std::string> lines;
  const auto add = [&](char mark, const std::string& text) {
    std::size_t start = 0;
    while (start < text.size()) {
      const std::size_t end = text.find('\n', start);
      lines.push_back(std::string(1, mark) + printable(text.substr(start, end - start)));
      if (end == std::string::npos) break;
      start = end + 1;
    }
  };
  if (req.tool_name == "write") {
    add('+', field_or(*args, "content", ""));
  } else if (req.tool_name == "edit") {
    add('-', field_or(*args, "old_string", ""));
    add('+', field_or(*args, "new_string", ""));
  }
  std::string out;
  constexpr std::size_t shown = 20;
  for (std::size_t i = 0; i < lines.size() && i < shown; ++i) out += "    " + lines[i] + "\n";
  if (lines.size() > shown) out += "    … " + std::to_string(lines.size() - shown) + " more lines\n";
  return out;
}

/// The person's decision, typed at the terminal; nullopt when the approval
/// was settled elsewhere first (or the terminal closed: then rejected).
asio::awaitable<std::optional<std::pair<protocol::ApprovalOutcome, std::optional<std::string>>>> ask_approval(
    Cli& cli, const PendingDecision& d, const std::string& label) {
  const protocol::ApprovalRequested& req = *d.approval;
  std::string text = "\n✋ " + label + "\n";
  if (!req.reason.empty()) text += "   " + printable(req.reason) + "\n";
  text += change_preview(req);
  tty_write(cli, text);
  for (;;) {
    tty_write(cli, "Allow " + label + "? [y]es once / [a]lways for this session / [n]o: ");
    std::optional<std::string> line = co_await tty_line(cli);
    if (!line) {
      if (cli.settled.contains(d.id())) co_return std::nullopt;
      co_return std::pair{protocol::ApprovalOutcome::rejected, std::optional<std::string>("no answer (end of input)")};
    }
    std::string answer = trimmed(*line);
    std::transform(answer.begin(), answer.end(), answer.begin(), [](unsigned char c) { return std::tolower(c); });
    if (answer == "y" || answer == "yes") co_return std::pair{protocol::ApprovalOutcome::allowed_once, std::nullopt};
    if (answer == "a" || answer == "always") {
      co_return std::pair{protocol::ApprovalOutcome::allowed_for_session, std::nullopt};
    }
    if (answer == "n" || answer == "no") {
      tty_write(cli, "Message for the model (optional): ");
      std::optional<std::string> message = co_await tty_line(cli);
      if (!message && cli.settled.contains(d.id())) co_return std::nullopt;
      std::optional<std::string> told;
      if (message && !trimmed(*message).empty()) told = trimmed(*message);
      co_return std::pair{protocol::ApprovalOutcome::rejected, std::move(told)};
    }
  }
}

/// Answers typed at the terminal: per question a number (several, comma
/// separated, with multi_select) or free text; nothing at all declines.
asio::awaitable<std::optional<std::vector<protocol::Answer>>> ask_questions(Cli& cli, const PendingDecision& d) {
  std::vector<protocol::Answer> answers;
  bool any = false;
  for (const json::value& entry : d.question->questions) {
    const json::object* q = entry.if_object();
    if (q == nullptr) continue;
    protocol::Answer answer;
    answer.id = field_or(*q, "id", "");
    std::vector<std::string> labels;
    std::string text = "\n? ";
    if (const std::string header = field_or(*q, "header", ""); !header.empty()) text += "[" + printable(header) + "] ";
    text += printable(field_or(*q, "question", ""), true) + "\n";
    if (const json::value* options = q->if_contains("options"); options != nullptr && options->is_array()) {
      for (const json::value& option : options->get_array()) {
        const json::object* o = option.if_object();
        if (o == nullptr || o->if_contains("label") == nullptr || !o->at("label").is_string()) continue;
        labels.emplace_back(o->at("label").get_string());
        text += "  " + std::to_string(labels.size()) + ") " + printable(labels.back());
        if (const std::string desc = field_or(*o, "description", ""); !desc.empty()) text += " — " + printable(desc);
        text += "\n";
      }
    }
    const json::value* multi_value = q->if_contains("multi_select");
    const bool multi = multi_value != nullptr && multi_value->is_bool() && multi_value->get_bool();
    tty_write(cli, text);
    for (;;) {
      tty_write(cli, labels.empty() ? "Answer (empty: skip): "
                     : multi      ? "Numbers, comma separated, or your own answer (empty: skip): "
                                  : "Number, or your own answer (empty: skip): ");
      std::optional<std::string> line = co_await tty_line(cli);
      if (!line) {
        if (cli.settled.contains(d.id())) co_return std::nullopt;
        co_return std::vector<protocol::Answer>{};  // the terminal closed: declined
      }
      const std::string typed = trimmed(*line);
      if (typed.empty()) break;
      // All numbers in range: options picked; anything else is the person's own words.
      std::vector<std::string> picked;
      bool numbers = !labels.empty();
      std::size_t start = 0;
      while (numbers && start <= typed.size()) {
        const std::size_t comma = typed.find(',', start);
        const std::string token = trimmed(typed.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        const bool digits = !token.empty() && token.size() < 4 &&
                            std::all_of(token.begin(), token.end(), [](unsigned char c) { return std::isdigit(c); });
        const std::size_t index = digits ? std::stoul(token) : 0;
        if (index < 1 || index > labels.size()) {
          numbers = false;
        } else {
          picked.push_back(labels[index - 1]);
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      if (numbers && picked.size() > 1 && !multi) {
        tty_write(cli, "Only one option for this question.\n");
        continue;
      }
      if (numbers) {
        answer.selected = std::move(picked);
      } else {
        answer.custom = typed;
      }
      any = true;
      break;
    }
    answers.push_back(std::move(answer));
  }
  if (!any) answers.clear();
  co_return answers;
}

/// Sends one decision; a not-pending error means it was settled elsewhere.
template <class Send>
asio::awaitable<void> send_decision(Send send) {
  try {
    co_await send();
  } catch (const RpcError& e) {
    const json::object* data = e.data().if_object();
    const json::value* reason = data != nullptr ? data->if_contains("reason") : nullptr;
    if (reason != nullptr && reason->is_string() && reason->get_string() == "not-pending") {
      std::fputs("harness: already settled\n", stderr);
    } else {
      std::fprintf(stderr, "harness: decision refused: %s (code %d)\n", e.what(), e.code());
    }
  } catch (const ClientError& e) {
    std::fprintf(stderr, "harness: decision not sent: %s\n", e.what());
  }
}

asio::awaitable<void> decide_approval(Cli& cli, const PendingDecision& d) {
  const protocol::ApprovalRequested& req = *d.approval;
  const std::string label = printable(tool_label(req.tool_name, req.arguments));
  protocol::ApprovalOutcome outcome = protocol::ApprovalOutcome::rejected;
  std::optional<std::string> message;
  if (cli.options.approve == "all") {
    outcome = protocol::ApprovalOutcome::allowed_once;
    std::fprintf(stderr, "harness: allowed %s (--approve all)\n", label.c_str());
  } else if (cli.options.approve == "none") {
    message = "rejected by harness --approve none";
    std::fprintf(stderr, "harness: rejected %s (--approve none)\n", label.c_str());
  } else if (have_terminal(cli)) {
    cli.asking = d.id();
    auto decided = co_await ask_approval(cli, d, label);
    cli.asking.clear();
    if (!decided) co_return;  // its resolved event said how it ended
    outcome = decided->first;
    message = std::move(decided->second);
  } else {
    // Nobody to ask: fail closed.
    message = "rejected: harness had no terminal to ask and no --approve";
    std::fprintf(stderr, "harness: rejected %s: no terminal to ask (--approve all|none decides without one)\n",
                 label.c_str());
  }
  auto approve = [&]() { return cli.client->session_approve(d.session_id, req.approval_id, outcome, message); };
  co_await send_decision(approve);
}

asio::awaitable<void> decide_question(Cli& cli, const PendingDecision& d) {
  std::vector<protocol::Answer> answers;
  if (have_terminal(cli)) {
    cli.asking = d.id();
    auto typed = co_await ask_questions(cli, d);
    cli.asking.clear();
    if (!typed) co_return;
    answers = std::move(*typed);
    if (answers.empty()) std::fputs("harness: question declined\n", stderr);
  } else {
    std::fputs("harness: declined a question of the model: no terminal to ask\n", stderr);
  }
  auto answer = [&]() { return cli.client->session_answer(d.session_id, d.question->question_id, answers); };
  co_await send_decision(answer);
}

/// Works through the queue one decision at a time (one terminal, one prompt).
asio::awaitable<void> decide_all(Cli& cli) {
  while (!cli.decisions.empty() && cli.client && !cli.client->closed()) {
    const PendingDecision d = std::move(cli.decisions.front());
    cli.decisions.pop_front();
    if (cli.settled.contains(d.id())) continue;
    cli.tools.close();
    cli.out.end_line();
    if (d.approval) {
      co_await decide_approval(cli, d);
    } else {
      co_await decide_question(cli, d);
    }
  }
  cli.deciding = false;
}

/// approval/requested and question/requested of the running turn (and of its
/// subagents) join the queue; their resolved events settle them, also when
/// the terminal is asking about one right now.
void note_decision(Cli& cli, const Notification& n) {
  if (n.method != "session.event" || !cli.turn_running) return;
  const json::value* sid = n.params.if_contains("sessionId");
  if (sid == nullptr || !sid->is_string()) return;
  PendingDecision d;
  d.session_id = std::string(sid->get_string());
  try {
    d.approval = as_approval_requested(n);
    if (!d.approval) d.question = as_question_requested(n);
    std::optional<std::string> resolved;
    if (auto r = as_approval_resolved(n)) resolved = r->approval_id;
    if (auto r = as_question_resolved(n)) resolved = r->question_id;
    if (resolved) {
      cli.settled.insert(*resolved);
      if (cli.asking == *resolved && cli.tty) {
        boost::system::error_code ignored;
        cli.tty->cancel(ignored);
        tty_write(cli, "\n(settled elsewhere)\n");
      }
      return;
    }
  } catch (const ProtocolError& e) {
    std::fprintf(stderr, "harness: %s\n", e.what());
    return;
  }
  if (!d.approval && !d.question) return;
  cli.decisions.push_back(std::move(d));
  if (!cli.deciding) {
    cli.deciding = true;
    asio::co_spawn(cli.io, decide_all(cli), asio::detached);
  }
}

void on_notification(Cli& cli, const Notification& n) {
  note_decision(cli, n);
  if (cli.options.json) {
    write_stdout(n.raw + "\n");
    return;
  }
  if (std::optional<std::string_view> text = text_delta_of(n, cli.options.session)) {
    cli.tools.close();
    cli.out.text(*text);
    return;
  }
  // Tool calls of this session (a subagent's own run in its child session).
  if (n.method != "session.event") return;
  const json::value* sid = n.params.if_contains("sessionId");
  const json::value* event = n.params.if_contains("event");
  if (sid == nullptr || !sid->is_string() || sid->get_string() != cli.options.session || event == nullptr ||
      !event->is_object()) {
    return;
  }
  const std::string type = field_or(event->get_object(), "type", "");
  if (type == "tool/call" || type == "tool/result") {
    print_tool_event(cli, type, object_or_empty(event->get_object(), "data"));
  }
}

/// Prints one event as part of a transcript: "> " before each line of a user
/// message, the assistant's text as it streams (or from its message when no
/// delta came), "[tool-call NAME ARGS]", "[tool-result: TEXT]" and, at a
/// turn's end, the status line a prompt prints. With --json, the event as
/// one JSON line. Events at or below the last printed seq are skipped.
void print_event(Cli& cli, const json::object& event) {
  Transcript& t = cli.transcript;
  const std::optional<std::int64_t> seq = seq_of(event);
  if (seq) {
    if (*seq <= t.last_seq) return;
    t.last_seq = *seq;
  }
  if (t.ended) return;  // attach: the followed turn is over
  const std::string type = field_or(event, "type", "");
  const json::object& data = object_or_empty(event, "data");
  const bool ends = type == "turn/end" && t.end_after && seq && *seq > *t.end_after;
  if (ends) {
    t.ended = true;
    t.end_reason = object_or_empty(data, "reason");
    t.end_status = status_of(t.end_reason);
  }
  if (cli.options.json) {
    write_stdout(json::serialize(event) + "\n");
    if (ends) std::fprintf(stderr, "%s\n", status_line(t.end_status, t.end_reason).c_str());
    return;
  }
  TextOut& out = cli.out;
  if (type == "user/message") {
    out.end_line();
    std::string text = blocks_text(data, "text");
    std::string lines;
    std::size_t at = 0;
    do {
      const std::size_t nl = text.find('\n', at);
      lines += "> " + text.substr(at, nl == std::string::npos ? std::string::npos : nl - at) + "\n";
      at = nl == std::string::npos ? std::string::npos : nl + 1;
    } while (at != std::string::npos && at < text.size());
    out.text(lines);
  } else if (type == "step/start") {
    t.step_text = false;
  } else if (type == "assistant/chunk") {
    const json::object& chunk = object_or_empty(data, "chunk");
    if (field_or(chunk, "type", "") == "text-delta") {
      const std::string text = field_or(chunk, "text", "");
      out.text(text);
      if (!text.empty()) t.step_text = true;
    }
  } else if (type == "assistant/message") {
    if (!t.step_text) out.text(blocks_text(data, "text"));
    t.step_text = true;
  } else if (type == "tool/call") {
    out.end_line();
    out.text("[tool-call " + field_or(data, "name", "?") + " " + field_or(data, "arguments", "") + "]\n");
  } else if (type == "tool/result") {
    out.end_line();
    const json::value* is_error = data.if_contains("isError");
    const bool failed = is_error != nullptr && is_error->is_bool() && is_error->get_bool();
    out.text(std::string(failed ? "[tool-error: " : "[tool-result: ") + blocks_text(data, "text") + "]\n");
  } else if (type == "turn/end") {
    out.end_line();
    const json::object& reason = object_or_empty(data, "reason");
    const std::string line = status_line(status_of(reason), reason) + "\n";
    if (ends) {
      std::fputs(line.c_str(), stderr);  // attach: where prompt prints it
    } else {
      out.text(line);
    }
  }
}

/// A subscription's events, on the client's executor.
void on_live_event(Cli& cli, const Notification& n) {
  const json::value* event = n.params.if_contains("event");
  if (event == nullptr || !event->is_object()) return;
  print_event(cli, event->get_object());
  cli.wake->notify();
}

/// Subscribes to the session with `after_seq` and prints its events until
/// `until_end` is met (the transcript's end), a signal or the connection's end.
/// Returns exit_ok when ended, else exit_connection for a lost connection or
/// -1 after a signal (or once stdout is closed).
asio::awaitable<int> follow(Cli& cli, std::int64_t after_seq, bool until_end) {
  NotificationHandler handler = [&cli](const Notification& n) { on_live_event(cli, n); };
  std::string session = cli.options.session;
  std::optional<std::int64_t> after = after_seq;
  SessionSubscription subscription =
      co_await cli.client->session_subscribe(std::move(session), after, std::move(handler));
  // The client reports the connection's end only to pending requests, and
  // a follower has none.
  cli.client->on_close([wake = cli.wake] { wake->notify(); });
  int rc = -1;
  for (;;) {
    if (until_end && cli.transcript.ended) {
      rc = exit_ok;
      break;
    }
    if (cli.quitting || std::ferror(stdout) != 0) break;  // a signal, or nobody reads our output
    if (cli.client->closed()) {
      cli.out.end_line();
      std::fprintf(stderr, "harness: connection lost while following %s\n", cli.options.session.c_str());
      rc = exit_connection;
      break;
    }
    co_await cli.wake->wait();
  }
  subscription.events.reset();
  co_return rc;
}

// ---------------------------------------------------------------------------
// sessions, log, attach

std::string format_time(std::int64_t epoch_ms) {
  const std::time_t secs = static_cast<std::time_t>(epoch_ms / 1000);
  std::tm tm{};
  if (::localtime_r(&secs, &tm) == nullptr) return std::to_string(epoch_ms);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

asio::awaitable<int> list_sessions(Cli& cli) {
  std::vector<harnessd::protocol::SessionSummary> rows;
  std::unordered_set<std::string> seen;  // an entry updated while paging can come twice
  std::optional<std::string> cursor;
  do {
    harnessd::protocol::ListParams page_options;
    page_options.limit = cli.options.page_size;
    page_options.cursor = std::move(cursor);
    harnessd::protocol::ListResult page = co_await cli.client->session_list(std::move(page_options));
    for (harnessd::protocol::SessionSummary& s : page.sessions) {
      if (!seen.insert(s.session_id).second) continue;
      if (cli.options.json) {
        write_stdout(json::serialize(json::value_from(s)) + "\n");
      } else {
        rows.push_back(std::move(s));
      }
    }
    cursor = std::move(page.next_cursor);
  } while (cursor && !cli.quitting);
  if (cli.options.json) co_return exit_ok;
  if (rows.empty()) {
    std::fputs("no sessions\n", stderr);
    co_return exit_ok;
  }

  const std::vector<std::string> header{"ID", "CREATED", "UPDATED", "LASTSEQ", "TURNS", "RUNNING", "PARENT"};
  std::vector<std::vector<std::string>> table{header};
  for (const harnessd::protocol::SessionSummary& s : rows) {
    table.push_back({s.session_id, format_time(s.created_at), format_time(s.updated_at), std::to_string(s.last_seq),
                     std::to_string(s.turns), s.running ? "yes" : "no", s.parent_session_id.value_or("-")});
  }
  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& row : table) {
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string text;
  for (const auto& row : table) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const bool number = i == 3 || i == 4;
      const std::string pad(width[i] - row[i].size(), ' ');
      if (i + 1 == row.size()) {
        line += row[i];
      } else {
        line += number ? pad + row[i] : row[i] + pad;
        line += "  ";
      }
    }
    text += line + "\n";
  }
  write_stdout(text);
  co_return exit_ok;
}

asio::awaitable<int> show_log(Cli& cli) {
  std::int64_t after = -1;
  for (;;) {
    std::string session = cli.options.session;
    harnessd::protocol::EventsResult page = co_await cli.client->session_events(std::move(session), after, events_page);
    const std::vector<json::object> events = events_of(page);
    for (const json::object& event : events) print_event(cli, event);
    if (!events.empty()) after = seq_of(events.back()).value_or(after);
    if (page.events.empty() || !page.more || cli.quitting) break;
  }
  if (!cli.options.follow) {
    cli.out.end_line();
    co_return exit_ok;
  }
  const int rc = co_await follow(cli, after, false);
  cli.out.end_line();
  if (rc < 0) co_return exit_ok;  // interrupted: the normal end of --follow
  co_return rc;
}

/// Events of `session` with after < seq <= upto, oldest first.
asio::awaitable<std::vector<json::object>> read_window(Cli& cli, std::int64_t after, std::int64_t upto) {
  std::vector<json::object> window;
  while (after < upto) {
    std::string session = cli.options.session;
    harnessd::protocol::EventsResult page = co_await cli.client->session_events(std::move(session), after, upto - after);
    for (json::object& event : events_of(page)) {
      const std::optional<std::int64_t> seq = seq_of(event);
      if (seq && *seq > after && *seq <= upto) window.push_back(std::move(event));
    }
    if (window.empty() || !page.more) break;
    const std::int64_t reached = seq_of(window.back()).value_or(upto);
    if (reached <= after) break;
    after = reached;
  }
  co_return window;
}

asio::awaitable<int> attach_session(Cli& cli) {
  std::string session = cli.options.session;
  harnessd::protocol::EventsResult probe = co_await cli.client->session_events(std::move(session), -1, 1);
  // Look back from the newest event, a page at a time, for the last turn/start.
  std::int64_t upto = probe.last_seq;
  std::vector<json::object> window;
  std::optional<std::size_t> start;
  while (upto >= 0 && !start) {
    const std::int64_t after = std::max<std::int64_t>(-1, upto - events_page);
    window = co_await read_window(cli, after, upto);
    for (std::size_t i = window.size(); i-- > 0;) {
      if (field_or(window[i], "type", "") == "turn/start") {
        start = i;
        break;
      }
    }
    upto = after;
  }
  if (!start) {
    std::fprintf(stderr, "harness: session %s has no logged turn to attach to\n", cli.options.session.c_str());
    co_return exit_error;
  }
  const std::int64_t start_seq = seq_of(window[*start]).value_or(0);
  cli.transcript.end_after = start_seq;
  // Ended already: report how.
  for (std::size_t i = *start + 1; i < window.size(); ++i) {
    if (field_or(window[i], "type", "") != "turn/end") continue;
    const json::value* turn = object_or_empty(window[*start], "data").if_contains("turn");
    std::string turn_text = "?";
    if (turn != nullptr) turn_text = json::serialize(*turn);
    std::fprintf(stderr, "harness: no turn is running in %s; its last turn (%s) ended:\n",
                 cli.options.session.c_str(), turn_text.c_str());
    print_event(cli, window[i]);
    co_return exit_code_of(cli.transcript.end_status);
  }
  // Running: replay it from its turn/start, then follow it live.
  const int rc = co_await follow(cli, start_seq - 1, true);
  cli.out.end_line();
  if (rc == exit_ok) co_return exit_code_of(cli.transcript.end_status);
  if (rc < 0) {
    std::fprintf(stderr, "[detached: the turn keeps running]\n");
    co_return exit_aborted;
  }
  co_return rc;
}

/// sessions, log and attach: the daemon's error answers exit 1, a lost
/// connection 3.
asio::awaitable<int> run_reader(Cli& cli) {
  int rc = exit_connection;
  try {
    if (cli.mode == Mode::sessions) {
      rc = co_await list_sessions(cli);
    } else if (cli.mode == Mode::log) {
      rc = co_await show_log(cli);
    } else {
      rc = co_await attach_session(cli);
    }
  } catch (const RpcError& e) {
    cli.out.end_line();
    std::fprintf(stderr, "harness: %s (code %d)\n", e.what(), e.code());
    rc = exit_error;
  } catch (const TransportClosed& e) {
    cli.out.end_line();
    if (cli.quitting) {
      rc = cli.mode == Mode::attach ? exit_aborted : exit_ok;
    } else {
      std::fprintf(stderr, "harness: connection lost: %s\n", e.what());
      rc = exit_connection;
    }
  } catch (const ClientError& e) {
    cli.out.end_line();
    std::fprintf(stderr, "harness: %s\n", e.what());
    rc = exit_connection;
  }
  co_return rc;
}

/// One turn: stream it, print the status line, return the exit code.
asio::awaitable<int> run_turn(Cli& cli, std::string text) {
  cli.turn_running = true;
  cli.interrupts = 0;
  cli.out = TextOut{};
  cli.tools = ToolLines{};
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
  cli.tools.close();
  if (failed >= 0) co_return failed;

  if (cli.options.json) {
    write_stdout(result.raw_response + "\n");
  } else {
    if (!cli.out.printed_text) cli.out.text(result.final_response);
    cli.out.end_line();
  }
  if (cli.mode == Mode::prompt || result.status != "ok") {
    std::fprintf(stderr, "%s\n", status_line(result.status, result.reason).c_str());
  }
  co_return exit_code_of(result.status);
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
      ConnectOptions connect_options;
      connect_options.ca_file = cli.options.ca_file;
      connect_options.insecure = cli.options.insecure;
      // ws:// and wss://: an Authorization header, so the token never
      // appears in a URL (proxy logs, error messages).
      connect_options.bearer_token = cli.options.token;
      transport = co_await connect_url(executor, std::move(url), std::move(connect_options));
    } else {
      SpawnOptions spawn;
      spawn.program = cli.options.harnessd.empty() ? default_harnessd() : cli.options.harnessd;
      where = spawn.program;
      spawn.args = {"--log-level", cli.options.verbose >= 2 ? "info" : "warn"};
      spawn.args.insert(spawn.args.end(), cli.options.daemon_args.begin(), cli.options.daemon_args.end());
      transport = spawn_stdio(executor, spawn);
    }
  } catch (const boost::system::system_error& e) {
    failure = e.code().message();  // what() carries Asio's source location
  } catch (const CertificateError& e) {
    failure = e.what();
    if (cli.options.ca_file.empty()) failure += " (--ca-file FILE trusts a private CA)";
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

  harnessd::protocol::InitializeParams init;
  init.client_info = json::object{{"name", "harness"}, {"version", harnessd::util::version}};
  if (!cli.options.provider.empty()) init.provider = cli.options.provider;
  if (!cli.options.model.empty()) init.model = cli.options.model;
  if (!cli.options.token.empty() &&
      (cli.options.connect.starts_with("tcp://") || cli.options.connect.starts_with("tls://"))) {
    init.auth_token = cli.options.token;
  }
  if (cli.options.on_disconnect == "continue") init.on_disconnect = harnessd::protocol::OnDisconnect::continue_running;
  if (!cli.options.approval_policy.empty()) {
    init.approval_policy = harnessd::protocol::parse_approval_policy(cli.options.approval_policy);
  }
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
  } else if (cli.mode == Mode::chat) {
    rc = co_await chat_loop(cli);
  } else {
    rc = co_await run_reader(cli);
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
    cli.wake->notify();
    if (cli.mode == Mode::log || cli.mode == Mode::attach) continue;  // the follower closes the connection
    boost::system::error_code ignored;
    cli.input.cancel(ignored);
    cli.input.close(ignored);
    if (cli.client) asio::co_spawn(cli.io, close_client(cli), asio::detached);
  }
}

void add_connection_options(CLI::App* cmd, Options& o) {
  auto* connect = cmd->add_option("--connect", o.connect,
                                  "Daemon to use: tcp://HOST:PORT or ws://HOST:PORT[/?access_token=TOKEN], or over "
                                  "TLS tls://HOST:PORT or wss://HOST:PORT[/?access_token=TOKEN]");
  auto* spawn = cmd->add_flag("--spawn", o.spawn,
                              "Start a private `harnessd --stdio` for this command (the default without --connect)");
  connect->excludes(spawn);
  cmd->add_option("--harnessd", o.harnessd,
                  "Daemon binary for --spawn (default: the harnessd next to harness, else PATH)")
      ->excludes(connect);
  cmd->add_option("--daemon-arg", o.daemon_args,
                  "Extra argument for the spawned daemon, repeatable (e.g. --daemon-arg=--store --daemon-arg=memory)")
      ->allow_extra_args(false);
  auto* token = cmd->add_option("--token", o.token,
                                "Auth token: initialize authToken on tcp:// and tls://, Authorization: Bearer on "
                                "ws:// and wss:// (visible in `ps`: prefer --token-file or $HARNESSD_TOKEN)");
  cmd->add_option("--token-file", o.token_file, "Read the auth token from the first line of this file")
      ->check(CLI::ExistingFile)
      ->excludes(token);
  auto* ca_file = cmd->add_option("--ca-file", o.ca_file,
                                  "PEM file of the CAs to trust for tls:// and wss:// instead of the system's "
                                  "(e.g. the private CA of the daemon's certificate)")
                      ->check(CLI::ExistingFile);
  cmd->add_flag("--insecure", o.insecure,
                "TESTING ONLY: do not verify the certificate of a tls:// or wss:// daemon "
                "(anyone in the path can read and change the traffic)")
      ->excludes(ca_file);
  cmd->add_flag("-v,--verbose", o.verbose,
                "The text of each tool result under its line on stderr (folded to 20 lines); -vv also debug logs "
                "of the client and info logs of a spawned daemon");
}

/// prompt and chat: the options of running turns.
void add_turn_options(CLI::App* cmd, Options& o) {
  add_connection_options(cmd, o);
  cmd->add_option("--session", o.session, "Session id (default: a fresh cli-XXXXXXXX); reuse one to continue it");
  cmd->add_flag("--json", o.json,
                "Print every notification and the final response as one JSON line each, instead of text");
  cmd->add_option("--provider", o.provider, "Provider for initialize (scripted, deepseek, ...)");
  cmd->add_option("--model", o.model, "Model for initialize");
  cmd->add_option("--on-disconnect", o.on_disconnect,
                  "What the daemon does with the running turn if this client goes away: cancel (the daemon's\n"
                  "default) or continue (it runs to its end detached; `harness attach` picks it up)")
      ->check(CLI::IsMember({"cancel", "continue"}));
  cmd->add_option("--approval-policy", o.approval_policy,
                  "initialize.approvalPolicy: never (tools run unasked) or ask (tools that may change something\n"
                  "wait for a decision). Default: the daemon's (never on --spawn, ask on tcp:// and ws://)")
      ->check(CLI::IsMember({"never", "ask"}));
  cmd->add_option("--approve", o.approve,
                  "Settle approvals without asking: all (allow each call once) or none (reject each). Without\n"
                  "it a terminal is asked; with no terminal every approval is rejected (fail closed)")
      ->check(CLI::IsMember({"all", "none"}));
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  Options options;
  CLI::App app{
      "harness: command-line client of harnessd. Sends a prompt, streams the assistant's\n"
      "text to stdout as it arrives and prints the turn's status to stderr; lists sessions,\n"
      "prints their transcripts and follows turns that other clients run.\n\n"
      "Examples:\n"
      "  harness prompt \"hello\"                          # spawn a private harnessd --stdio\n"
      "  harness prompt --connect tcp://127.0.0.1:7879 --session demo \"what next?\"\n"
      "  harness prompt --connect ws://127.0.0.1:7878 --json \"@chunks 3 4\"\n"
      "  harness prompt --connect wss://daemon.example:7878 --ca-file ca.pem \"hi\"  # TLS, a private CA\n"
      "  harness prompt --spawn --harnessd ./build/harnessd --daemon-arg=--store --daemon-arg=memory hi\n"
      "  echo \"long question\" | harness prompt -          # read the prompt from stdin\n"
      "  harness chat --session demo                     # one line per turn; Ctrl-C cancels, Ctrl-D quits\n"
      "  harness prompt --connect tcp://127.0.0.1:7879 --approve all \"fix the tests\"  # allow every tool call\n"
      "  printf 'hi\\nbye\\n' | harness chat                 # scripted conversation\n"
      "  harness sessions --connect tcp://127.0.0.1:7879 # every session, most recently updated first\n"
      "  harness log --connect tcp://127.0.0.1:7879 demo --follow   # transcript, then live events\n"
      "  harness attach --connect tcp://127.0.0.1:7879 demo         # follow demo's running turn to its end\n\n"
      "Exit status: 0 ok, 1 error (turn error or error response), 2 aborted (cancelled),\n"
      "3 connection or usage error. `attach` exits with the status of the turn it followed.",
      "harness"};
  app.set_version_flag("--version", std::string("harness ") + std::string(harnessd::util::version));
  app.require_subcommand(1);

  CLI::App* prompt = app.add_subcommand("prompt", "Run one turn and exit with its status");
  add_turn_options(prompt, options);
  prompt->add_option("text", options.words, "The prompt (several words are joined by spaces; - reads stdin)")
      ->required();
  prompt->footer(
      "Output: assistant text (text-delta chunks) on stdout, then [ok], [error: MESSAGE] or\n"
      "[aborted: REASON] on stderr. Ctrl-C sends session/cancel; a second Ctrl-C quits.\n"
      "Prompts starting with '-' need `--` first: harness prompt -- -x.\n"
      "Approvals (approvalPolicy ask, the default of network daemons): a tool call that may change\n"
      "something is asked about on the terminal: [y]es once / [a]lways for this session / [n]o\n"
      "(then an optional message for the model). --approve all|none decides without asking; with\n"
      "no terminal and no --approve each is rejected. Questions of the model (ask_user_question)\n"
      "are asked on the terminal, or declined (answers []) without one.\n"
      "With --on-disconnect continue, a turn outlives a lost connection: follow it again with\n"
      "`harness attach SESSION` (from any machine that reaches the daemon).");

  CLI::App* chat = app.add_subcommand("chat", "Interactive conversation: each stdin line is one turn");
  add_turn_options(chat, options);
  chat->footer(
      "Each line read from stdin is sent as a turn of the same session; answers stream to\n"
      "stdout. Ctrl-C cancels the running turn (session/cancel), a second Ctrl-C quits;\n"
      "EOF (Ctrl-D) quits.");

  CLI::App* sessions = app.add_subcommand("sessions", "List the daemon's sessions (session/list)");
  add_connection_options(sessions, options);
  sessions->add_flag("--json", options.json,
                     "One JSON object per line, as the daemon sends them (sessionId, createdAt, updatedAt,\n"
                     "lastSeq, turns, running, parentSessionId), instead of the table");
  sessions->add_option("--page-size", options.page_size, "Sessions asked for per session/list request")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  sessions->footer(
      "Prints a table of every session, most recently updated first, paging through\n"
      "session/list with its cursor:\n"
      "  ID    CREATED              UPDATED              LASTSEQ  TURNS  RUNNING  PARENT\n"
      "  demo  2025-06-01 10:00:00  2025-06-01 10:02:13       21      2  no       -\n"
      "Times are local. LASTSEQ is the seq of the last logged event (-1: none), TURNS the\n"
      "turns started, RUNNING whether a turn runs (or waits) on the daemon now, detached\n"
      "ones included; PARENT is set for subagent sessions.\n"
      "Without --connect a private daemon lists the logs under ./.sessions (or\n"
      "--daemon-arg=--session-root --daemon-arg=DIR); use --connect while a daemon runs.\n\n"
      "Examples:\n"
      "  harness sessions --connect tcp://127.0.0.1:7879\n"
      "  harness sessions --connect tcp://127.0.0.1:7879 --json | jq -r 'select(.running) | .sessionId'");

  CLI::App* log = app.add_subcommand("log", "Print a session's transcript; --follow keeps printing live events");
  add_connection_options(log, options);
  log->add_option("session", options.session, "Session id")->required();
  log->add_flag("-f,--follow", options.follow,
                "After the logged events, subscribe and print new events as they come, until Ctrl-C");
  log->add_flag("--json", options.json, "One event per line, as logged ({type, seq, time, data}), instead of text");
  log->footer(
      "Reads the session's log with session/events, oldest first, and prints it as a transcript:\n"
      "  > the user's message (each line after \"> \")\n"
      "  the assistant's answer\n"
      "  [tool-call NAME ARGUMENTS] / [tool-result: TEXT] / [tool-error: TEXT]\n"
      "  [ok], [error: MESSAGE] or [aborted: REASON] at the end of each turn\n"
      "--follow then sends session/subscribe with the last seq read, so no event is missed or\n"
      "printed twice, and streams the text of running turns as it arrives. Ctrl-C ends it\n"
      "(exit 0). An unknown session exits 1.\n\n"
      "Examples:\n"
      "  harness log --connect tcp://127.0.0.1:7879 demo\n"
      "  harness log --connect tcp://127.0.0.1:7879 demo --follow\n"
      "  harness log --connect tcp://127.0.0.1:7879 demo --json | jq -c 'select(.type==\"turn/end\")'");

  CLI::App* attach = app.add_subcommand("attach", "Follow a session's running turn to its end and exit with its status");
  add_connection_options(attach, options);
  attach->add_option("session", options.session, "Session id")->required();
  attach->add_flag("--json", options.json, "Print the turn's events as JSON lines ({type, seq, time, data})");
  attach->footer(
      "Finds the session's last turn/start, prints that turn from its start (as `harness log`\n"
      "does) and follows it live to its turn/end; the status line goes to stderr and the exit\n"
      "status is the one `harness prompt` gives: 0 ok, 1 error, 2 aborted. A turn started\n"
      "with `--on-disconnect continue` by a client that is gone can be picked up this way.\n"
      "When no turn runs, it prints the last turn's status and exits with its code.\n"
      "Ctrl-C detaches (exit 2) and leaves the turn running; cancel it with session/cancel.\n"
      "A turn that stopped at the token limit counts as error here, even on a daemon run\n"
      "with --max-tokens-as-success. Attaching needs the session's log: a daemon run with\n"
      "--store memory keeps none.\n\n"
      "Examples:\n"
      "  harness prompt --connect tcp://127.0.0.1:7879 --session job --on-disconnect continue \"...\"\n"
      "  harness attach --connect tcp://127.0.0.1:7879 job; echo \"turn ended with $?\"");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? exit_ok : exit_connection;
  }

  if (options.token.empty() && !options.token_file.empty()) {
    std::ifstream in(options.token_file);
    std::getline(in, options.token);
    while (!options.token.empty() && (options.token.back() == '\r' || options.token.back() == ' ')) {
      options.token.pop_back();
    }
    if (options.token.empty()) {
      std::fprintf(stderr, "harness: --token-file %s holds no token\n", options.token_file.c_str());
      return exit_connection;
    }
  }
  if (const char* env = std::getenv("HARNESSD_TOKEN"); options.token.empty() && env != nullptr) options.token = env;

  auto logger = spdlog::stderr_color_mt("harness");
  spdlog::set_default_logger(logger);
  spdlog::set_level(options.verbose >= 2 ? spdlog::level::debug : spdlog::level::warn);
  if (options.session.empty()) options.session = random_session_id();
  Mode mode = Mode::prompt;
  if (chat->parsed()) mode = Mode::chat;
  if (sessions->parsed()) mode = Mode::sessions;
  if (log->parsed()) mode = Mode::log;
  if (attach->parsed()) mode = Mode::attach;

  asio::io_context io(1);
  Cli cli(io, options, mode);
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
