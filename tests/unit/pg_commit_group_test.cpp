// The rules that settle a PostgreSQL commit group (store/pg/commit_group.hpp)
// on made-up database answers: a group with any failure commits nothing,
// and when its writes run again alone, only the one that fails (and the
// same session's writes after it) fail.
#include "store/pg/commit_group.hpp"

#include <doctest/doctest.h>

using namespace harnessd::store::pg;

namespace {

Result ok(std::int64_t affected) {
  Result r;
  r.ok = true;
  r.affected = affected;
  return r;
}

Result refused(std::string error) {
  Result r;
  r.error = std::move(error);
  return r;
}

}  // namespace

TEST_CASE("commit group: all statements OK settle each write by its row count") {
  const GroupWrite writes[] = {{"a", 1, 3}, {"b", 4, 2}, {"c", 2, 1}};
  const Result results[] = {ok(3), ok(0), ok(1)};
  const auto settled = settle_together(writes, results);
  REQUIRE(settled);
  REQUIRE(settled->size() == 3);
  CHECK((*settled)[0].outcome == WriteOutcome::committed);
  CHECK((*settled)[1].outcome == WriteOutcome::fenced);  // the fence let it insert nothing
  CHECK((*settled)[2].outcome == WriteOutcome::committed);
}

TEST_CASE("commit group: one failed statement fails the whole transaction, the OK ones before it too") {
  const GroupWrite writes[] = {{"a", 1, 3}, {"b", 1, 2}, {"c", 1, 1}};
  // What PostgreSQL answers before the connection marks the rollback: the
  // first write reported its rows, yet it was rolled back with the rest.
  const Result results[] = {ok(3), refused("ERROR: poisoned"), refused("not run")};
  CHECK_FALSE(settle_together(writes, results));
  const Result commit_failed[] = {refused("at commit"), refused("at commit"), refused("at commit")};
  CHECK_FALSE(settle_together(writes, commit_failed));
  const Result missing[] = {ok(3), ok(2)};
  CHECK_FALSE(settle_together(writes, missing));
}

TEST_CASE("commit group: run alone, only the write that fails again fails") {
  const GroupWrite writes[] = {{"a", 1, 3}, {"b", 1, 2}, {"c", 1, 1}, {"d", 7, 4}};
  const Result results[] = {ok(3), refused("ERROR: poisoned"), ok(1), ok(0)};
  const std::vector<Settled> settled = settle_alone(writes, results);
  REQUIRE(settled.size() == 4);
  CHECK(settled[0].outcome == WriteOutcome::committed);
  CHECK(settled[1].outcome == WriteOutcome::failed);
  CHECK(settled[1].error == "PostgreSQL refused the write: ERROR: poisoned");
  CHECK(settled[2].outcome == WriteOutcome::committed);
  CHECK(settled[3].outcome == WriteOutcome::fenced);
}

TEST_CASE("commit group: a session's writes after its failed one fail too, whatever the database said") {
  const GroupWrite writes[] = {{"a", 1, 2}, {"b", 1, 1}, {"a", 1, 1}, {"b", 1, 5}, {"a", 1, 3}};
  const Result results[] = {refused("ERROR: poisoned"), ok(1), ok(1), ok(5), ok(0)};
  const std::vector<Settled> settled = settle_alone(writes, results);
  REQUIRE(settled.size() == 5);
  CHECK(settled[0].outcome == WriteOutcome::failed);
  CHECK(settled[1].outcome == WriteOutcome::committed);
  // Even had it landed, its events would follow a gap: never committed.
  CHECK(settled[2].outcome == WriteOutcome::failed);
  CHECK(settled[2].error == "an earlier write of the session was not committed");
  CHECK(settled[3].outcome == WriteOutcome::committed);
  CHECK(settled[4].outcome == WriteOutcome::failed);
}

TEST_CASE("commit group: the same session under a newer lease is another sequence") {
  const GroupWrite writes[] = {{"a", 1, 2}, {"a", 2, 1}};
  const Result results[] = {refused("ERROR: poisoned"), ok(1)};
  const std::vector<Settled> settled = settle_alone(writes, results);
  CHECK(settled[0].outcome == WriteOutcome::failed);
  CHECK(settled[1].outcome == WriteOutcome::committed);
}

TEST_CASE("commit group: a fenced write does not fail the session's later ones, the fence refuses them") {
  const GroupWrite writes[] = {{"a", 1, 2}, {"a", 1, 1}};
  const Result results[] = {ok(0), ok(0)};
  const std::vector<Settled> settled = settle_alone(writes, results);
  CHECK(settled[0].outcome == WriteOutcome::fenced);
  CHECK(settled[1].outcome == WriteOutcome::fenced);
}

TEST_CASE("commit group: a result missing for a write fails it") {
  const GroupWrite writes[] = {{"a", 1, 2}, {"b", 1, 1}};
  const Result results[] = {ok(2)};
  const std::vector<Settled> settled = settle_alone(writes, results);
  CHECK(settled[0].outcome == WriteOutcome::committed);
  CHECK(settled[1].outcome == WriteOutcome::failed);
}
