#include "harnessd/harness/turn_status.hpp"

#include <doctest/doctest.h>

using namespace harnessd::harness;
namespace json = boost::json;

TEST_CASE("every TurnEndReason maps to the protocol's status") {
  CHECK(status_for(turn_end::completed(), false) == "ok");
  CHECK(status_for(turn_end::aborted("cancelled"), false) == "aborted");
  CHECK(status_for(turn_end::max_tokens(), false) == "error");
  CHECK(status_for(turn_end::max_tokens(), true) == "ok");
  CHECK(status_for(turn_end::error("boom", "X"), true) == "error");
  CHECK(status_for(turn_end::interrupted(), false) == "error");
  CHECK(status_for(json::object{{"kind", "disposed"}}, false) == "error");
  CHECK(status_for(json::object{{"kind", "rejected"}}, false) == "error");
  CHECK(status_for(json::object{{"kind", "something-new"}}, false) == "error");
  CHECK(status_for(json::object{}, false) == "error");
}

TEST_CASE("reasons carry their details") {
  CHECK(turn_end::aborted("cancelled").at("reason") == "cancelled");
  const json::object e = turn_end::error("boom", "RATE_LIMIT");
  CHECK(e.at("message") == "boom");
  CHECK(e.at("code") == "RATE_LIMIT");
  CHECK_FALSE(turn_end::error("boom").contains("code"));
}
