// Myers' O(ND) line diff (forward search, the trace kept only for the
// diagonals reached) and GNU-style unified hunks around its edit script.
#include "tools/unified_diff.hpp"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace harnessd::tools {
namespace diff_detail {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    lines.push_back(text.substr(start, end - start));  // with its '\n', if any
    start = end;
  }
  return lines;
}

enum class Op : char { equal = ' ', remove = '-', add = '+' };

/// Myers on a[0..n) and b[0..m); false when it would cost more than `budget`.
bool myers(const int* a, int n, const int* b, int m, std::size_t budget, std::vector<Op>& out) {
  const int max = n + m;
  const int offset = max + 1;
  std::vector<int> v(2 * static_cast<std::size_t>(max) + 3, 0);
  std::vector<std::vector<int>> trace;  // trace[d]: v over k in [-d-1, d+1] before round d
  std::size_t cost = 0;
  int final_d = -1;
  for (int d = 0; d <= max && final_d < 0; ++d) {
    trace.emplace_back(v.begin() + (offset - d - 1), v.begin() + (offset + d + 2));
    cost += 2 * static_cast<std::size_t>(d) + 3;
    for (int k = -d; k <= d; k += 2) {
      int x = (k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1])) ? v[offset + k + 1]
                                                                          : v[offset + k - 1] + 1;
      int y = x - k;
      while (x < n && y < m && a[x] == b[y]) {
        ++x;
        ++y;
        ++cost;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        final_d = d;
        break;
      }
    }
    if (cost > budget) return false;
  }
  // Walk back from (n, m) through the trace.
  std::vector<Op> reversed;
  int x = n;
  int y = m;
  for (int d = final_d; d >= 0; --d) {
    const std::vector<int>& t = trace[static_cast<std::size_t>(d)];
    auto at = [&](int k) { return t[static_cast<std::size_t>(k + d + 1)]; };
    const int k = x - y;
    const int prev_k = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
    const int prev_x = at(prev_k);
    const int prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      reversed.push_back(Op::equal);
      --x;
      --y;
    }
    if (d > 0) reversed.push_back(x == prev_x ? Op::add : Op::remove);
    x = prev_x;
    y = prev_y;
  }
  out.insert(out.end(), reversed.rbegin(), reversed.rend());
  return true;
}

void append_range(std::string& out, std::size_t start, std::size_t count) {
  // GNU: an empty range names the line before it; a count of 1 is omitted.
  out += std::to_string(count == 0 ? start : start + 1);
  if (count != 1) {
    out += ',';
    out += std::to_string(count);
  }
}

void append_line(std::string& out, char prefix, std::string_view line) {
  out += prefix;
  if (!line.empty() && line.back() == '\n') {
    out += line;
  } else {
    out += line;
    out += "\n\\ No newline at end of file\n";
  }
}

}  // namespace diff_detail

UnifiedDiff unified_diff(std::string_view before, std::string_view after, std::string_view old_label,
                         std::string_view new_label, const DiffOptions& options) {
  using namespace diff_detail;
  UnifiedDiff result;
  if (before == after) return result;
  const std::vector<std::string_view> a = split_lines(before);
  const std::vector<std::string_view> b = split_lines(after);

  std::size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  std::size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  const std::size_t n = a.size() - prefix - suffix;
  const std::size_t m = b.size() - prefix - suffix;

  std::vector<Op> ops(prefix, Op::equal);
  bool diffed = false;
  if (n > 0 && m > 0 && n + m <= 2'000'000) {
    // Lines as small integers: the search compares ints, not strings.
    std::unordered_map<std::string_view, int> ids;
    std::vector<int> ia(n);
    std::vector<int> ib(m);
    for (std::size_t i = 0; i < n; ++i) ia[i] = ids.emplace(a[prefix + i], static_cast<int>(ids.size())).first->second;
    for (std::size_t i = 0; i < m; ++i) ib[i] = ids.emplace(b[prefix + i], static_cast<int>(ids.size())).first->second;
    diffed = myers(ia.data(), static_cast<int>(n), ib.data(), static_cast<int>(m), options.max_cost, ops);
  }
  if (!diffed) {
    result.approximate = n > 0 && m > 0;
    ops.insert(ops.end(), n, Op::remove);
    ops.insert(ops.end(), m, Op::add);
  }
  ops.insert(ops.end(), suffix, Op::equal);

  // Positions in a and b before each op.
  std::vector<std::size_t> pos_a(ops.size() + 1);
  std::vector<std::size_t> pos_b(ops.size() + 1);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    pos_a[i + 1] = pos_a[i] + (ops[i] != Op::add ? 1 : 0);
    pos_b[i + 1] = pos_b[i] + (ops[i] != Op::remove ? 1 : 0);
    if (ops[i] == Op::add) ++result.added;
    if (ops[i] == Op::remove) ++result.removed;
  }

  std::string& out = result.text;
  out += "--- ";
  out += old_label;
  out += "\n+++ ";
  out += new_label;
  out += '\n';
  const std::size_t context = options.context;
  std::size_t i = 0;
  while (i < ops.size()) {
    if (ops[i] == Op::equal) {
      ++i;
      continue;
    }
    // A hunk: from `context` lines before this change to `context` lines
    // after the last change that is at most 2*context equal lines away.
    const std::size_t begin = i >= context ? i - context : 0;
    std::size_t end = i;
    for (;;) {
      while (end < ops.size() && ops[end] != Op::equal) ++end;
      std::size_t next = end;
      while (next < ops.size() && ops[next] == Op::equal) ++next;
      if (next < ops.size() && next - end <= 2 * context) {
        end = next;
        continue;
      }
      end = std::min(ops.size(), end + context);
      break;
    }
    out += "@@ -";
    append_range(out, pos_a[begin], pos_a[end] - pos_a[begin]);
    out += " +";
    append_range(out, pos_b[begin], pos_b[end] - pos_b[begin]);
    out += " @@\n";
    for (std::size_t j = begin; j < end; ++j) {
      switch (ops[j]) {
        case Op::equal: append_line(out, ' ', a[pos_a[j]]); break;
        case Op::remove: append_line(out, '-', a[pos_a[j]]); break;
        case Op::add: append_line(out, '+', b[pos_b[j]]); break;
      }
    }
    i = end;
  }
  return result;
}

}  // namespace harnessd::tools
