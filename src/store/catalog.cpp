#include "store/catalog.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <tuple>

namespace harnessd::store {

namespace {

/// Newest update first, then by id: the order of session/list.
bool listed_before(std::int64_t a_updated, std::string_view a_id, std::int64_t b_updated, std::string_view b_id) {
  return std::tie(b_updated, a_id) < std::tie(a_updated, b_id);
}

}  // namespace

ListCursor parse_list_cursor(std::string_view text) {
  const std::size_t space = text.find(' ');
  ListCursor cursor;
  const char* end = text.data() + (space == std::string_view::npos ? text.size() : space);
  const auto [ptr, ec] = std::from_chars(text.data(), end, cursor.updated_at);
  if (space == std::string_view::npos || ec != std::errc() || ptr != end || space + 1 >= text.size()) {
    throw std::invalid_argument("not a cursor of session/list");
  }
  cursor.id = text.substr(space + 1);
  return cursor;
}

std::string list_cursor(const SessionInfo& last) { return std::to_string(last.updated_at_ms) + " " + last.id; }

Catalog::Handle Catalog::opened(SessionInfo info) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = sessions_.try_emplace(info.id);
  it->second = std::move(info);
  return &it->second;
}

void Catalog::advance(Handle entry, const LogPosition& at) {
  std::lock_guard lock(mutex_);
  entry->last_seq = at.last_seq;
  entry->turns = at.turns;
  entry->updated_at_ms = at.time_ms;
}

void Catalog::found(SessionInfo info) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = sessions_.try_emplace(info.id);
  if (inserted || it->second.removed || info.last_seq > it->second.last_seq) it->second = std::move(info);
}

bool Catalog::remove(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.removed) return false;
  it->second.removed = true;
  return true;
}

bool Catalog::contains(std::string_view id) const {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  return it != sessions_.end() && !it->second.removed;
}

std::optional<SessionInfo> Catalog::find(std::string_view id) const {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.removed) return std::nullopt;
  return it->second;
}

ListPage Catalog::page(const std::optional<std::string>& cursor_text, std::size_t limit) const {
  std::optional<ListCursor> cursor;
  if (cursor_text) cursor = parse_list_cursor(*cursor_text);
  ListPage page;
  std::lock_guard lock(mutex_);
  // One pass picks the sessions after the cursor; only the page's worth is
  // sorted, so a page costs O(n + limit log limit) for n sessions.
  std::vector<const SessionInfo*> after;
  after.reserve(cursor ? sessions_.size() / 2 : sessions_.size());
  for (const auto& [id, info] : sessions_) {
    if (info.removed) continue;
    if (!cursor || listed_before(cursor->updated_at, cursor->id, info.updated_at_ms, id)) after.push_back(&info);
  }
  const auto order = [](const SessionInfo* a, const SessionInfo* b) {
    return listed_before(a->updated_at_ms, a->id, b->updated_at_ms, b->id);
  };
  const std::size_t n = std::min(limit, after.size());
  std::partial_sort(after.begin(), after.begin() + static_cast<std::ptrdiff_t>(n), after.end(), order);
  page.sessions.reserve(n);
  for (std::size_t i = 0; i < n; ++i) page.sessions.push_back(*after[i]);
  if (after.size() > n && n > 0) {
    const SessionInfo& last = page.sessions.back();
    page.next_cursor = list_cursor(last);
  }
  return page;
}

std::size_t Catalog::size() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
      std::count_if(sessions_.begin(), sessions_.end(), [](const auto& entry) { return !entry.second.removed; }));
}

}  // namespace harnessd::store
