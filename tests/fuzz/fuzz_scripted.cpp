// Fuzzes the directive parser of the `scripted` model, which reads the text
// of any user's prompt: whatever it accepts must stay within the documented
// ranges, since the scripted turn allocates and sleeps by those numbers.
#include "fuzz_check.hpp"

#include "llm/scripted_provider.hpp"

using harnessd::llm::Script;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string_view text = harnessd::fuzz::as_view(bytes, size);
  const Script script = harnessd::llm::parse_script(text);
  FUZZ_CHECK(script.delay_ms >= 0 && script.delay_ms <= 600'000);
  switch (script.action) {
    case Script::Action::chunks:
      FUZZ_CHECK(script.chunk_count >= 1 && script.chunk_count <= 10'000'000);
      FUZZ_CHECK(script.chunk_bytes >= 1 && script.chunk_bytes <= (std::size_t{1} << 20));
      FUZZ_CHECK(static_cast<std::uint64_t>(script.chunk_count) * script.chunk_bytes <= (std::uint64_t{256} << 20));
      FUZZ_CHECK(harnessd::llm::scripted_chunk_text(script.chunk_count - 1, 1).size() == 1);
      break;
    case Script::Action::invalid:
    case Script::Action::error:
      FUZZ_CHECK(!script.text.empty());
      break;
    case Script::Action::echo:
      FUZZ_CHECK(script.text.starts_with("echo: "));
      FUZZ_CHECK(script.text.size() <= text.size() + 6);
      break;
    default:
      FUZZ_CHECK(script.text.size() <= text.size());
      break;
  }
  return 0;
}
