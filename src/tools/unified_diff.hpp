// The unified diff that `write` and `edit` attach as meta.diff, so clients
// can show what a tool changed: a Myers line diff, with a whole-file
// replace hunk when the files are too large or too different to diff fast.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace harnessd::tools {

struct DiffOptions {
  std::size_t context = 3;  ///< unchanged lines around each change
  /// Work (Myers steps) after which the diff falls back to replacing every
  /// line between the common prefix and suffix.
  std::size_t max_cost = 4'000'000;
};

struct UnifiedDiff {
  std::string text;  ///< "" when the texts are equal
  std::size_t added = 0;
  std::size_t removed = 0;
  bool approximate = false;  ///< the fallback replace hunk was used
};

/// `before` → `after` as a unified diff whose header lines are
/// `--- OLD_LABEL` and `+++ NEW_LABEL` (e.g. "a/src/x.cpp", "/dev/null").
/// A last line without a newline is marked "\ No newline at end of file".
UnifiedDiff unified_diff(std::string_view before, std::string_view after, std::string_view old_label,
                         std::string_view new_label, const DiffOptions& options = {});

}  // namespace harnessd::tools
