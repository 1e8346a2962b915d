// Fuzzes the OpenAI-compatible stream decoder with untrusted `data:`
// payloads (one per input line): whatever a provider sends, the chunks it
// yields must be well-formed and serializable, since they reach clients and
// the session log verbatim.
#include "fuzz_check.hpp"

#include "llm/openai_format.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <set>
#include <stdexcept>

namespace json = boost::json;
namespace openai = harnessd::llm::openai;

namespace {

/// Deeper than any input the harness is given, so depth never fails a check.
json::parse_options any_depth() {
  json::parse_options options;
  options.max_depth = 100'000;
  return options;
}

bool reparses(const json::value& v) {
  json::error_code ec;
  json::parse(json::serialize(v), ec, {}, any_depth());
  return !ec;
}

/// replace_non_finite on any JSON, whatever its depth.
void check_replace_non_finite(std::string_view line) {
  json::error_code ec;
  json::value v = json::parse(line, ec, {}, any_depth());
  if (ec) return;
  openai::replace_non_finite(v);
  FUZZ_CHECK(reparses(v));
  FUZZ_CHECK(openai::replace_non_finite(v) == 0);
}

/// A chunk's wire text is JSON, and (usage aside, whose numbers Boost.JSON
/// 1.81 may reread a bit off) exactly the text Boost.JSON writes for it.
json::object wire_object(const harnessd::protocol::Chunk& chunk) {
  std::string text;
  harnessd::protocol::append_json(text, chunk);
  json::error_code ec;
  json::value parsed = json::parse(text, ec, {}, any_depth());
  FUZZ_CHECK(!ec && parsed.is_object());
  if (!std::holds_alternative<harnessd::protocol::UsageChunk>(chunk)) FUZZ_CHECK(json::serialize(parsed) == text);
  return std::move(parsed.get_object());
}

/// Block protocol: each block starts once with the next index, deltas and
/// ends name a started block, and finish comes last.
void check_chunks(const std::vector<harnessd::protocol::Chunk>& chunks, bool finished) {
  std::int64_t started = 0;
  std::set<std::int64_t> ended;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const json::object c = wire_object(chunks[i]);
    FUZZ_CHECK(reparses(c));
    const json::string& type = c.at("type").as_string();
    if (type == "block-start") {
      FUZZ_CHECK(c.at("index").as_int64() == started);
      ++started;
    } else if (type == "block-end") {
      const std::int64_t index = c.at("index").as_int64();
      FUZZ_CHECK(index < started && ended.insert(index).second);
    } else if (type == "finish") {
      FUZZ_CHECK(finished && i + 1 == chunks.size());
    } else if (type != "usage") {
      const std::int64_t index = c.at("index").as_int64();
      FUZZ_CHECK(index < started && !ended.contains(index));
    }
  }
  if (finished) FUZZ_CHECK(static_cast<std::int64_t>(ended.size()) == started);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  std::string_view data = harnessd::fuzz::as_view(bytes, size);
  openai::StreamDecoder decoder;
  std::vector<harnessd::protocol::Chunk> chunks;
  bool failed = false;
  while (!data.empty()) {
    const std::size_t newline = data.find('\n');
    const std::string_view line = data.substr(0, newline);
    data.remove_prefix(newline == std::string_view::npos ? data.size() : newline + 1);
    check_replace_non_finite(line);
    if (failed || decoder.done()) continue;
    try {
      if (!decoder.on_data(line, chunks)) FUZZ_CHECK(decoder.done());
    } catch (const std::runtime_error&) {
      failed = true;  // the provider ends the turn with an error here
    }
  }
  if (!failed) decoder.finish(chunks);
  check_chunks(chunks, !failed);
  return 0;
}
