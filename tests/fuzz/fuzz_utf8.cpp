// Fuzzes UTF-8 repair (util/utf8.hpp) and what it guards: a model endpoint's
// bytes, whatever they are, become texts that a session log stores and reads
// back. Invalid UTF-8 in one logged event used to make session/events fail
// ("corrupt line") and the session impossible to load again.
//
// 1. valid_utf8 against an independent transcription of the WHATWG decoder
//    (byte-exact output), is_valid_utf8 against a code point decoder, and
//    cut_utf8's bounds.
// 2. The provider path as far as the fuzz core reaches (no harness layer):
//    the input, cut into reads, becomes text, reasoning and tool call chunks
//    repaired at the provider boundary (llm::make_valid_utf8, as the turn
//    does), an error body quoted by openai::error_detail, error_result()
//    messages, and the scripted provider's echo and @error of the raw bytes.
//    They are logged as one turn in a JsonlStore, which must load them again
//    and page them (session/events' reader) byte for byte.
#include "fuzz_check.hpp"

#include "harnessd/protocol/chunk.hpp"
#include "harnessd/protocol/turn_end.hpp"
#include "llm/openai_format.hpp"
#include "llm/scripted_provider.hpp"
#include "llm/valid_text.hpp"
#include "store/detail/log_reader.hpp"
#include "store/jsonl_store.hpp"
#include "util/json_append.hpp"
#include "util/utf8.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;
namespace llm = harnessd::llm;
namespace protocol = harnessd::protocol;
namespace store = harnessd::store;
namespace util = harnessd::util;

namespace {

// ---------------------------------------------------------------- references

void append_code_point(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// The WHATWG Encoding Standard's UTF-8 decoder, step by step (§4.1 "UTF-8
/// decoder"), re-encoding what it decodes: the reference for valid_utf8.
std::string whatwg_decode(std::string_view bytes) {
  std::string out;
  std::uint32_t code_point = 0;
  int needed = 0, seen = 0;
  unsigned lower = 0x80, upper = 0xBF;
  std::size_t i = 0;
  while (true) {
    if (i == bytes.size()) {
      if (needed != 0) append_code_point(out, 0xFFFD);
      return out;
    }
    const unsigned byte = static_cast<unsigned char>(bytes[i]);
    if (needed == 0) {
      ++i;
      if (byte <= 0x7F) {
        out += static_cast<char>(byte);
      } else if (byte >= 0xC2 && byte <= 0xDF) {
        needed = 1, code_point = byte & 0x1F;
      } else if (byte >= 0xE0 && byte <= 0xEF) {
        if (byte == 0xE0) lower = 0xA0;
        if (byte == 0xED) upper = 0x9F;
        needed = 2, code_point = byte & 0xF;
      } else if (byte >= 0xF0 && byte <= 0xF4) {
        if (byte == 0xF0) lower = 0x90;
        if (byte == 0xF4) upper = 0x8F;
        needed = 3, code_point = byte & 0x7;
      } else {
        append_code_point(out, 0xFFFD);
      }
      continue;
    }
    if (byte < lower || byte > upper) {
      // The byte is not consumed: it is read again as the start of the next.
      code_point = 0, needed = 0, seen = 0, lower = 0x80, upper = 0xBF;
      append_code_point(out, 0xFFFD);
      continue;
    }
    ++i;
    lower = 0x80, upper = 0xBF;
    code_point = (code_point << 6) | (byte & 0x3F);
    if (++seen == needed) {
      append_code_point(out, code_point);
      code_point = 0, needed = 0, seen = 0;
    }
  }
}

/// Well-formedness by decoding code points: the reference for is_valid_utf8.
bool decodes(std::string_view s) {
  static constexpr std::uint32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned lead = static_cast<unsigned char>(s[i]);
    std::size_t length;
    std::uint32_t cp;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2, cp = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, cp = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, cp = lead & 0x07;
    } else {
      return false;
    }
    if (i + length > s.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      const unsigned c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (cp < min_for_length[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

void check_repair(std::string_view input, std::size_t cut_at) {
  const std::string repaired = util::valid_utf8(input);
  FUZZ_CHECK(repaired == whatwg_decode(input));
  FUZZ_CHECK(util::is_valid_utf8(input) == decodes(input));
  FUZZ_CHECK(util::is_valid_utf8(repaired));
  if (util::is_valid_utf8(input)) FUZZ_CHECK(repaired == input);
  FUZZ_CHECK(util::valid_utf8(repaired) == repaired);
  std::string in_place(input);
  util::make_valid_utf8(in_place);
  FUZZ_CHECK(in_place == repaired);

  // A cut of valid text: at most the limit, valid, a prefix, and as long as
  // it can be (the next character would not fit).
  const std::string_view cut = util::cut_utf8(repaired, cut_at);
  FUZZ_CHECK(cut.size() <= cut_at);
  FUZZ_CHECK(util::is_valid_utf8(cut));
  FUZZ_CHECK(std::string_view(repaired).starts_with(cut));
  if (repaired.size() <= cut_at) {
    FUZZ_CHECK(cut.size() == repaired.size());
  } else {
    FUZZ_CHECK(cut_at - cut.size() <= 3);
    const std::string_view rest = std::string_view(repaired).substr(cut.size());
    std::size_t next = 1;
    while (next < rest.size() && (static_cast<unsigned char>(rest[next]) & 0xC0) == 0x80) ++next;
    FUZZ_CHECK(cut.size() + next > cut_at);
  }
  // Any input: a prefix no longer than the limit.
  const std::string_view raw_cut = util::cut_utf8(input, cut_at);
  FUZZ_CHECK(raw_cut.size() <= cut_at && input.starts_with(raw_cut));
}

// ---------------------------------------------------------- provider → store

/// One store for the whole run, as in fuzz_jsonl_store: tmpfs if there is one.
struct Fixture {
  fs::path dir;
  std::unique_ptr<store::JsonlStore> store;
  fs::path file;
  asio::io_context io;

  Fixture() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                              : tmp != nullptr && *tmp != '\0' ? tmp
                                                                : "/tmp";
    std::string pattern = base + "/harnessd-fuzz-utf8-XXXXXX";
    FUZZ_CHECK(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    store = std::make_unique<store::JsonlStore>(dir, store::JsonlOptions{.sync = store::SyncMode::none});
    file = dir / store::session_file_name("u8");
  }
  ~Fixture() {
    store.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

/// Collects what a provider yields.
class Collect final : public llm::ChunkSink {
 public:
  std::vector<protocol::Chunk> chunks;
  asio::awaitable<void> on_chunk(protocol::Chunk chunk) override {
    chunks.push_back(std::move(chunk));
    co_return;
  }
  asio::awaitable<void> flush() override { co_return; }
};

/// Runs the scripted provider on `user_text` to its end.
llm::ModelResult run_scripted(asio::io_context& io, std::string user_text, Collect& sink) {
  const std::vector<llm::ChatMessage> messages{
      llm::ChatMessage{.role = llm::ChatMessage::Role::user, .text = std::move(user_text)}};
  llm::ModelRequest request;
  request.messages = &messages;
  llm::ScriptedProvider provider;
  llm::CancelScope cancel;
  llm::ModelResult result;
  std::exception_ptr failure;
  asio::co_spawn(io, provider.stream(request, sink, cancel),
                 [&](std::exception_ptr e, llm::ModelResult r) {
                   failure = e;
                   result = std::move(r);
                 });
  io.restart();
  io.run();
  FUZZ_CHECK(!failure);
  return result;
}

/// Events of one turn, serialized as the turn does (Session::append_serialized_event).
class TurnLog {
 public:
  void add(std::string_view type, std::string_view data_json) {
    std::string event = R"({"type":")";
    event += type;
    event += R"(","seq":)";
    util::append_json_int(event, static_cast<std::int64_t>(events.size()));
    event += R"(,"time":1,"data":)";
    event += data_json;
    event += '}';
    events.push_back(std::move(event));
  }
  void add_chunk(protocol::Chunk chunk) {
    // The provider boundary.
    llm::make_valid_utf8(chunk);
    std::string data = R"({"turn":0,"step":0,"chunk":)";
    protocol::append_json(data, chunk);
    data += '}';
    add("assistant/chunk", data);
  }
  std::vector<std::string> events;
};

std::string text_content(std::string_view text) {
  std::string data = R"({"content":[{"type":"text","text":)";
  util::append_json_string(data, text);
  data += "}]}";
  return data;
}

void check_provider_path(std::string_view input) {
  Fixture& f = fixture();
  const std::vector<std::size_t> sizes = harnessd::fuzz::take_read_sizes(input);

  TurnLog turn;
  turn.add("turn/start", R"({"turn":0,"trigger":{"kind":"message","source":{"kind":"user"}}})");
  // The user's text came as JSON: valid already.
  turn.add("user/message", text_content(util::valid_utf8(input)));
  turn.add("step/start", R"({"turn":0,"step":0})");

  // Deltas as an endpoint's reads would cut them, each kind in turn.
  turn.add_chunk(protocol::BlockStart{0, protocol::BlockType::text});
  harnessd::fuzz::for_each_read(input, sizes, [&turn](std::string_view piece, std::size_t i) {
    switch (i % 3) {
      case 0: turn.add_chunk(protocol::TextDelta{0, std::string(piece)}); break;
      case 1: turn.add_chunk(protocol::ReasoningDelta{1, std::string(piece)}); break;
      default:
        turn.add_chunk(protocol::ToolCallDelta{2, std::string(piece.substr(0, 8)), std::string(piece),
                                               std::string(piece)});
        break;
    }
  });

  // The scripted provider echoes the raw bytes ('@' taken out: no directive,
  // no delay) and quotes them in @error.
  std::string echo(input);
  for (char& c : echo) {
    if (c == '@') c = '.';
  }
  Collect echoed;
  const llm::ModelResult echo_result = run_scripted(f.io, echo, echoed);
  FUZZ_CHECK(echo_result.finish == llm::FinishReason::stop);
  for (protocol::Chunk& chunk : echoed.chunks) {
    // Valid before the boundary: the provider repairs its own texts.
    if (const auto* delta = std::get_if<protocol::TextDelta>(&chunk)) FUZZ_CHECK(util::is_valid_utf8(delta->text));
    turn.add_chunk(std::move(chunk));
  }
  const std::string first_line(echo.substr(0, echo.find('\n')));
  Collect errored;
  const llm::ModelResult error = run_scripted(f.io, "@error " + first_line, errored);
  FUZZ_CHECK(error.finish == llm::FinishReason::error);
  FUZZ_CHECK(util::is_valid_utf8(error.error_message) && util::is_valid_utf8(error.error_code));

  // An endpoint's error body, quoted; the message as error_result() keeps it.
  const std::string detail = llm::openai::error_detail(input);
  FUZZ_CHECK(util::is_valid_utf8(detail));
  const llm::ModelResult failed =
      llm::error_result("the model endpoint answered HTTP 502: " + detail + std::string(input), llm::errc::server,
                        std::string(input.substr(0, 16)));
  FUZZ_CHECK(util::is_valid_utf8(failed.error_message) && util::is_valid_utf8(failed.error_code));

  turn.add("step/end", R"({"turn":0,"step":0})");
  const auto reason = protocol::TurnEndReason::error(failed.error_message, failed.error_code);
  json::object end{{"turn", 0}, {"reason", json::value_from(reason)}};
  turn.add("turn/end", json::serialize(end));

  // Logged, then loaded again and paged as session/events pages.
  store::SessionHeader header;
  header.id = "u8";
  header.created_at_ms = 1;
  fs::remove(f.file);
  {
    auto log = f.store->open_now(header);
    const std::vector<std::string_view> views(turn.events.begin(), turn.events.end());
    log->append(views, store::LogPosition{static_cast<std::int64_t>(views.size()) - 1, 1, 1});
  }
  {
    auto log = f.store->open_now(header, store::OpenMode::existing);
    const std::vector<json::object> loaded = log->take_loaded_events();
    FUZZ_CHECK(loaded.size() == turn.events.size());
    for (std::size_t i = 0; i < loaded.size(); ++i) FUZZ_CHECK(json::serialize(loaded[i]) == turn.events[i]);
  }
  const auto page = store::detail::read_log_page(f.file.string(), -1, turn.events.size() + 1, std::size_t{1} << 30);
  FUZZ_CHECK(page.has_value());
  FUZZ_CHECK(page->events == turn.events);
  fs::remove(f.file);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string_view input = harnessd::fuzz::as_view(bytes, size);
  // The cut's limit: the first byte (0-255), so cuts land everywhere in
  // short inputs and at 300 (error_detail's) in long ones.
  const std::size_t cut_at = input.empty() ? 0 : static_cast<unsigned char>(input[0]);
  check_repair(input, cut_at);
  check_repair(input.substr(input.empty() ? 0 : 1), 300);
  check_provider_path(input);
  return 0;
}
