// How the writes of one commit group end, decided from the database's
// answers alone: kept apart from the writer (writer.cpp) so that the rules
// can be tested without a database.
//
// A group first runs as one transaction. If any statement of it fails,
// PostgreSQL rolls back the whole transaction, the statements that had
// answered OK before the failure included: none of the group counts as
// committed. The writer then runs the group's writes again, each in its own
// transaction and in order, so that only a write that fails alone fails its
// turn. A session's writes follow each other without a seq gap: once one
// of them fails, its later writes in the group fail too (the database
// refuses them as well: a write only lands right after the session's last
// seq).
#pragma once

#include "store/pg/connection.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace harnessd::store::pg {

/// One write of a group, as far as settling it needs.
struct GroupWrite {
  std::string_view session_id;
  std::int64_t epoch = 0;  ///< the lease it was made under
  std::size_t count = 0;   ///< the rows it inserts when it lands
};

enum class WriteOutcome {
  committed,
  fenced,  ///< refused by the lease epoch: another node owns the session
  failed,  ///< not committed; `error` says why
};

struct Settled {
  WriteOutcome outcome = WriteOutcome::failed;
  std::string error;
};

namespace detail {

/// A write whose statement succeeded: it landed with all its rows, or the
/// fence (or the seq check) let it insert none.
inline Settled landed_or_fenced(const GroupWrite& write, const Result& result) {
  if (result.affected == static_cast<std::int64_t>(write.count)) return Settled{WriteOutcome::committed, {}};
  return Settled{WriteOutcome::fenced, {}};
}

}  // namespace detail

/// The group ran as one transaction with these results (one per write, in
/// order). nullopt when any of them failed: then nothing of the group
/// committed, and the writes must run again one by one (settle_alone).
inline std::optional<std::vector<Settled>> settle_together(std::span<const GroupWrite> writes,
                                                           std::span<const Result> results) {
  if (results.size() != writes.size()) return std::nullopt;
  for (const Result& r : results) {
    if (!r.ok) return std::nullopt;
  }
  std::vector<Settled> out;
  out.reserve(writes.size());
  for (std::size_t i = 0; i < writes.size(); ++i) out.push_back(detail::landed_or_fenced(writes[i], results[i]));
  return out;
}

/// The writes ran again, each in its own transaction, in order, with these
/// results. A write that failed fails; so does every later write of the same
/// session under the same lease, whatever the database answered for it: its
/// events would follow a gap.
inline std::vector<Settled> settle_alone(std::span<const GroupWrite> writes, std::span<const Result> results) {
  std::vector<Settled> out;
  out.reserve(writes.size());
  // (session, epoch) of the writes that failed so far: few, a vector will do.
  std::vector<std::pair<std::string_view, std::int64_t>> broken;
  for (std::size_t i = 0; i < writes.size(); ++i) {
    const GroupWrite& w = writes[i];
    const bool after_failure =
        std::find(broken.begin(), broken.end(), std::pair{w.session_id, w.epoch}) != broken.end();
    if (after_failure) {
      out.push_back(Settled{WriteOutcome::failed, "an earlier write of the session was not committed"});
      continue;
    }
    if (i >= results.size()) {
      out.push_back(Settled{WriteOutcome::failed, "PostgreSQL sent no result for the write"});
    } else if (!results[i].ok) {
      out.push_back(Settled{WriteOutcome::failed, "PostgreSQL refused the write: " + results[i].error});
    } else {
      out.push_back(detail::landed_or_fenced(w, results[i]));
    }
    // A fenced write needs no such care: the fence refuses the later ones too.
    if (out.back().outcome == WriteOutcome::failed) broken.emplace_back(w.session_id, w.epoch);
  }
  return out;
}

}  // namespace harnessd::store::pg
