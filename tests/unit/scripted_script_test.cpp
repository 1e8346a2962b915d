#include "llm/scripted_provider.hpp"

#include <doctest/doctest.h>

using namespace harnessd::llm;
using Action = Script::Action;

TEST_CASE("plain text is echoed") {
  Script s = parse_script("hello\nworld");
  CHECK(s.action == Action::echo);
  CHECK(s.text == "echo: hello\nworld");
}

TEST_CASE("directives parse with their arguments") {
  CHECK(parse_script("@reply exactly this").text == "exactly this");
  Script chunks = parse_script("@chunks 20 8");
  CHECK(chunks.action == Action::chunks);
  CHECK(chunks.chunk_count == 20);
  CHECK(chunks.chunk_bytes == 8);
  Script delayed = parse_script("@delay 300\n@chunks 5 4");
  CHECK(delayed.delay_ms == 300);
  CHECK(delayed.action == Action::chunks);
  CHECK(parse_script("@delay 50\nhi").text == "echo: hi");
  CHECK(parse_script("@error boom now").text == "boom now");
  CHECK(parse_script("@max-tokens").action == Action::max_tokens);
  Script sub = parse_script("@subagent @reply hi");
  CHECK(sub.action == Action::subagent);
  CHECK(sub.text == "@reply hi");
}

TEST_CASE("bad directives are refused with a reason, never guessed") {
  CHECK(parse_script("@chunks x 8").action == Action::invalid);
  CHECK(parse_script("@chunks 5").action == Action::invalid);
  CHECK(parse_script("@chunks 0 8").action == Action::invalid);
  CHECK(parse_script("@chunks 100000 100000").action == Action::invalid);  // 10 GB
  CHECK(parse_script("@delay -1").action == Action::invalid);
  CHECK(parse_script("@delay 1000000").action == Action::invalid);
  Script unknown = parse_script("@frobnicate");
  CHECK(unknown.action == Action::invalid);
  CHECK(unknown.text.find("@frobnicate") != std::string::npos);
}

TEST_CASE("chunk i is the letter a+i%26 repeated") {
  CHECK(scripted_chunk_text(0, 3) == "aaa");
  CHECK(scripted_chunk_text(27, 2) == "bb");
}
