// UTF-8 repair at the provider boundary (util/utf8.hpp): valid text passes
// unchanged, each ill-formed maximal subpart becomes one U+FFFD (the
// results below match Python's bytes.decode("utf-8", "replace")), and a
// cut never splits a character.
#include "util/utf8.hpp"

#include "llm/openai_format.hpp"
#include "llm/valid_text.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

using harnessd::util::cut_utf8;
using harnessd::util::is_valid_utf8;
using harnessd::util::make_valid_utf8;
using harnessd::util::valid_utf8;

namespace {

const std::string u8_fffd = "\xEF\xBF\xBD";

std::string u8_times(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

/// UTF-8 of a code point, without any validity check (overlongs are made
/// by the tests by hand).
std::string u8_encode(std::uint32_t cp) {
  std::string out;
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
  return out;
}

}  // namespace

TEST_CASE("valid text passes through unchanged") {
  for (const std::string& text :
       {std::string(), std::string("plain ascii, long enough for the eight-byte fast path"),
        std::string("\0\x01\x7F", 3), std::string("caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80"),
        std::string("\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"),
        std::string("\xED\x9F\xBF\xEE\x80\x80")}) {  // U+D7FF and U+E000, either side of the surrogates
    CHECK(is_valid_utf8(text));
    CHECK(valid_utf8(text) == text);
    std::string copy = text;
    make_valid_utf8(copy);
    CHECK(copy == text);
  }
}

TEST_CASE("every scalar value is valid; every surrogate and value past U+10FFFF is not") {
  for (std::uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    const std::string bytes = u8_encode(cp);
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    if (is_valid_utf8(bytes) == surrogate) FAIL_CHECK("code point " << cp);
  }
  CHECK_FALSE(is_valid_utf8(u8_encode(0x110000)));
  CHECK_FALSE(is_valid_utf8(u8_encode(0x1FFFFF)));
}

TEST_CASE("overlong forms are replaced byte by byte where the lead cannot start them") {
  CHECK(valid_utf8("\xC0\xAF") == u8_fffd + u8_fffd);                  // '/' in two bytes
  CHECK(valid_utf8("\xC1\xBF") == u8_fffd + u8_fffd);
  CHECK(valid_utf8("\xE0\x80\xAF") == u8_fffd + u8_fffd + u8_fffd);        // '/' in three
  CHECK(valid_utf8("\xE0\x9F\xBF") == u8_fffd + u8_fffd + u8_fffd);        // U+07FF in three
  CHECK(valid_utf8("\xF0\x80\x80\xAF") == u8_times(u8_fffd, 4));        // '/' in four
  CHECK(valid_utf8("\xF0\x8F\xBF\xBF") == u8_times(u8_fffd, 4));        // U+FFFF in four
  CHECK(valid_utf8("a\xC0\x80z") == "a" + u8_fffd + u8_fffd + "z");     // the "modified UTF-8" NUL
}

TEST_CASE("surrogates are ill-formed") {
  CHECK(valid_utf8("\xED\xA0\x80") == u8_fffd + u8_fffd + u8_fffd);        // U+D800
  CHECK(valid_utf8("\xED\xBF\xBF") == u8_fffd + u8_fffd + u8_fffd);        // U+DFFF
  // A CESU-8 pair: six bytes, six replacements.
  CHECK(valid_utf8("\xED\xA0\xBD\xED\xB8\x80") == u8_times(u8_fffd, 6));
}

TEST_CASE("code points past U+10FFFF and bytes F5..FF are ill-formed") {
  CHECK(valid_utf8("\xF4\x90\x80\x80") == u8_times(u8_fffd, 4));        // U+110000
  CHECK(valid_utf8("\xF5\x80\x80\x80") == u8_times(u8_fffd, 4));
  CHECK(valid_utf8("\xF8\x88\x80\x80\x80") == u8_times(u8_fffd, 5));    // old five-byte form
  CHECK(valid_utf8("\xFE\xFF") == u8_fffd + u8_fffd);
  CHECK(valid_utf8("x\xFFy") == "x" + u8_fffd + "y");
}

TEST_CASE("lone continuation bytes become one replacement each") {
  CHECK(valid_utf8("\x80") == u8_fffd);
  CHECK(valid_utf8("\xBF\x80\xBF") == u8_times(u8_fffd, 3));
  CHECK(valid_utf8("a\x80" "b") == "a" + u8_fffd + "b");
  CHECK(valid_utf8("\xC3\xA9\xA9") == "\xC3\xA9" + u8_fffd);  // one too many after a whole character
}

TEST_CASE("a truncated sequence is one replacement, and the byte that broke it is kept") {
  CHECK(valid_utf8("\xC3") == u8_fffd);
  CHECK(valid_utf8("\xE4\xBD") == u8_fffd);
  CHECK(valid_utf8("\xF0\x9F\x98") == u8_fffd);
  CHECK(valid_utf8("a\xE4\xBDz") == "a" + u8_fffd + "z");
  CHECK(valid_utf8("\xF0\x9F\x98\xC3\xA9") == u8_fffd + "\xC3\xA9");
  CHECK(valid_utf8("\xE4\xBD\xE4\xBD\xA0") == u8_fffd + "\xE4\xBD\xA0");
  // Unicode 15 §3.9, table 3-8: U+0061 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  CHECK(valid_utf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64") ==
        "a" + u8_fffd + u8_fffd + u8_fffd + "b" + u8_fffd + "c" + u8_fffd + u8_fffd + "d");
}

TEST_CASE("mixed inputs match Python's errors=\"replace\"") {
  CHECK(valid_utf8("\x9F\xE1\xFF\x80\x8F\xF1") == u8_times(u8_fffd, 6));
  CHECK(valid_utf8("\xE0\xF4\x80\xF0") == u8_times(u8_fffd, 3));
  CHECK(valid_utf8("\x80\x8F\xED\xED\x8F") == u8_times(u8_fffd, 4));
  CHECK(valid_utf8("\xF4\xF4\xE1\x80") == u8_times(u8_fffd, 3));
  CHECK(valid_utf8("\xF1\x90\xF4\xC2\xF1") == u8_times(u8_fffd, 4));
  // Invalid bytes after a long valid ASCII prefix (the fast path's exit).
  const std::string prefix(37, 'p');
  CHECK(valid_utf8(prefix + "\xFF" + prefix) == prefix + u8_fffd + prefix);
}

TEST_CASE("repaired text is valid and repair is idempotent") {
  for (int byte = 0; byte < 256; ++byte) {
    for (int next : {0x00, 0x41, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xE0, 0xFF}) {
      const std::string text{static_cast<char>(byte), static_cast<char>(next), '\xBF'};
      const std::string repaired = valid_utf8(text);
      CHECK(is_valid_utf8(repaired));
      CHECK(valid_utf8(repaired) == repaired);
      std::string in_place = text;
      make_valid_utf8(in_place);
      CHECK(in_place == repaired);
    }
  }
}

TEST_CASE("a cut never ends inside a character") {
  const std::string text = "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80z";  // 1 + 2 + 3 + 4 + 1 bytes
  CHECK(cut_utf8(text, 100) == text);
  CHECK(cut_utf8(text, text.size()) == text);
  CHECK(cut_utf8(text, 0).empty());
  CHECK(cut_utf8(text, 1) == "a");
  CHECK(cut_utf8(text, 2) == "a");
  CHECK(cut_utf8(text, 3) == "a\xC3\xA9");
  CHECK(cut_utf8(text, 4) == "a\xC3\xA9");
  CHECK(cut_utf8(text, 5) == "a\xC3\xA9");
  CHECK(cut_utf8(text, 6) == "a\xC3\xA9\xE4\xBD\xA0");
  for (std::size_t n = 6; n < 10; ++n) CHECK(cut_utf8(text, n) == "a\xC3\xA9\xE4\xBD\xA0");
  CHECK(cut_utf8(text, 10) == "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80");
  for (std::size_t n = 0; n <= text.size(); ++n) {
    const std::string_view cut = cut_utf8(text, n);
    CHECK(cut.size() <= n);
    CHECK(n - cut.size() <= 3);
    CHECK(is_valid_utf8(cut));
  }
}

TEST_CASE("an endpoint's raw error body is cut at 300 bytes between characters") {
  using harnessd::llm::openai::error_detail;
  const std::string body = "x" + u8_times("\xC3\xA9", 200);
  const std::string detail = error_detail(body);
  CHECK(detail == "x" + u8_times("\xC3\xA9", 149));
  CHECK(is_valid_utf8(detail));

  CHECK(error_detail("\xFF\xFE") == u8_fffd + u8_fffd);
  CHECK(error_detail("bad gateway\r\n") == "bad gateway");
  CHECK(error_detail(std::string(500, 'y')) == std::string(300, 'y'));
  // Replacements may push the text past the cut; it is cut again, whole.
  const std::string detail2 = error_detail(std::string(299, 'y') + "\xFF\xFF");
  CHECK(detail2 == std::string(299, 'y'));
  // A JSON error keeps its message.
  CHECK(error_detail(R"({"error":{"message":"caf\u00e9 closed"}})") == "caf\xC3\xA9 closed");
}

TEST_CASE("error results and chunks are repaired at the provider boundary") {
  const auto result = harnessd::llm::error_result("bad \xC3", harnessd::llm::errc::server);
  CHECK(result.error_message == "bad " + u8_fffd);

  harnessd::protocol::Chunk text = harnessd::protocol::TextDelta{0, "a\xE4\xBD"};
  harnessd::llm::make_valid_utf8(text);
  CHECK(std::get<harnessd::protocol::TextDelta>(text).text == "a" + u8_fffd);

  harnessd::protocol::Chunk call = harnessd::protocol::ToolCallDelta{1, "id\x80", "n\xFF", "{\"a\":\"\xED\xA0\x80\"}"};
  harnessd::llm::make_valid_utf8(call);
  const auto& delta = std::get<harnessd::protocol::ToolCallDelta>(call);
  CHECK(delta.id == "id" + u8_fffd);
  CHECK(delta.name == "n" + u8_fffd);
  CHECK(delta.arguments_delta == "{\"a\":\"" + u8_times(u8_fffd, 3) + "\"}");
}
