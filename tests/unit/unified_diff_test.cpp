// The unified diff of write/edit's meta.diff (tools/unified_diff.hpp): GNU
// diff -u's hunks and ranges, the no-newline marker, and the whole-file
// fallback past the cost budget.
#include "tools/unified_diff.hpp"

#include <doctest/doctest.h>

#include <string>

using harnessd::tools::DiffOptions;
using harnessd::tools::unified_diff;

TEST_CASE("unified diff: equal texts give no diff") {
  const auto diff = unified_diff("a\nb\n", "a\nb\n", "a/x", "b/x");
  CHECK(diff.text.empty());
  CHECK(diff.added == 0);
  CHECK(diff.removed == 0);
}

TEST_CASE("unified diff: one changed line with context") {
  const auto diff = unified_diff("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n", "a/x", "b/x");
  CHECK(diff.text ==
        "--- a/x\n+++ b/x\n"
        "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
  CHECK(diff.added == 1);
  CHECK(diff.removed == 1);
  CHECK_FALSE(diff.approximate);
}

TEST_CASE("unified diff: distant changes make two hunks, near ones one") {
  std::string before;
  for (int i = 1; i <= 20; ++i) before += std::to_string(i) + "\n";
  std::string after = before;
  after.replace(after.find("2\n"), 2, "two\n");
  after.replace(after.find("\n18\n") + 1, 3, "eighteen\n");
  const auto two = unified_diff(before, after, "a/x", "b/x");
  CHECK(two.text ==
        "--- a/x\n+++ b/x\n"
        "@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n"
        "@@ -15,6 +15,6 @@\n 15\n 16\n 17\n-18\n+eighteen\n 19\n 20\n");
  std::string near = before;
  near.replace(near.find("\n8\n") + 1, 2, "eight\n");
  const auto one = unified_diff(before, near.replace(near.find("2\n"), 2, "two\n"), "a/x", "b/x");
  CHECK(one.text.find("@@ -1,11 +1,11 @@\n") != std::string::npos);
  CHECK(one.text.find("\n@@ ") == one.text.rfind("\n@@ "));  // one hunk
}

TEST_CASE("unified diff: new file, deleted content and empty ranges") {
  CHECK(unified_diff("", "a\nb\n", "/dev/null", "b/x").text == "--- /dev/null\n+++ b/x\n@@ -0,0 +1,2 @@\n+a\n+b\n");
  CHECK(unified_diff("a\n", "", "a/x", "b/x").text == "--- a/x\n+++ b/x\n@@ -1 +0,0 @@\n-a\n");
  // An insertion between lines names the line before it.
  CHECK(unified_diff("a\nb\n", "a\nnew\nb\n", "a/x", "b/x").text == "--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n a\n+new\n b\n");
}

TEST_CASE("unified diff: a last line without newline is marked") {
  CHECK(unified_diff("a\nb", "a\nb\n", "a/x", "b/x").text ==
        "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
}

TEST_CASE("unified diff: Myers finds the minimal script") {
  // The classic example: ABCABBA -> CBABAC has edit distance 5.
  auto lines = [](const std::string& s) {
    std::string out;
    for (char c : s) out += std::string(1, c) + "\n";
    return out;
  };
  const auto diff = unified_diff(lines("ABCABBA"), lines("CBABAC"), "a/x", "b/x");
  CHECK(diff.added + diff.removed == 5);
  CHECK_FALSE(diff.approximate);
}

TEST_CASE("unified diff: past the budget, one replace hunk") {
  std::string before;
  std::string after;
  for (int i = 0; i < 3000; ++i) {
    before += "old " + std::to_string(i) + "\n";
    after += "new " + std::to_string(i) + "\n";
  }
  before = "head\n" + before + "tail\n";
  after = "head\n" + after + "tail\n";
  DiffOptions options;
  options.max_cost = 1000;
  const auto diff = unified_diff(before, after, "a/x", "b/x", options);
  CHECK(diff.approximate);
  CHECK(diff.added == 3000);
  CHECK(diff.removed == 3000);
  CHECK(diff.text.rfind("--- a/x\n+++ b/x\n@@ -1,3002 +1,3002 @@\n head\n-old 0\n", 0) == 0);
  // The same input within budget is exact and the same size here.
  const auto exact = unified_diff(before, after, "a/x", "b/x");
  CHECK(exact.added == 3000);
}
