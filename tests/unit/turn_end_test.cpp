#include "harnessd/protocol/turn_end.hpp"

#include <boost/json/serialize.hpp>
#include <doctest/doctest.h>

using namespace harnessd::protocol;
namespace json = boost::json;

TEST_CASE("every TurnEndReason maps to the protocol's status") {
  CHECK(status_for(TurnEndReason::completed(), false) == TurnStatus::ok);
  CHECK(status_for(TurnEndReason::aborted("cancelled"), false) == TurnStatus::aborted);
  CHECK(status_for(TurnEndReason::max_tokens(), false) == TurnStatus::error);
  CHECK(status_for(TurnEndReason::max_tokens(), true) == TurnStatus::ok);
  CHECK(status_for(TurnEndReason::error("boom", "X"), true) == TurnStatus::error);
  CHECK(status_for(TurnEndReason::interrupted(), false) == TurnStatus::error);
  CHECK(to_string(TurnStatus::ok) == "ok");
  CHECK(to_string(TurnStatus::error) == "error");
  CHECK(to_string(TurnStatus::aborted) == "aborted");
}

TEST_CASE("reasons carry their details, in the wire's form") {
  CHECK(json::serialize(json::value_from(TurnEndReason::completed())) == R"({"kind":"completed"})");
  CHECK(json::serialize(json::value_from(TurnEndReason::aborted("cancelled"))) ==
        R"({"kind":"aborted","reason":"cancelled"})");
  CHECK(json::serialize(json::value_from(TurnEndReason::max_tokens())) == R"({"kind":"max-tokens"})");
  CHECK(json::serialize(json::value_from(TurnEndReason::error("boom", "RATE_LIMIT"))) ==
        R"({"kind":"error","message":"boom","code":"RATE_LIMIT"})");
  CHECK(json::serialize(json::value_from(TurnEndReason::error("boom"))) == R"({"kind":"error","message":"boom"})");
  CHECK(json::serialize(json::value_from(TurnEndReason::interrupted())) == R"({"kind":"interrupted"})");
}
