// Crash safety: appends go straight to the OS with writev(2) (a kill -9 loses
// nothing a client has seen); durability at turn end comes from the group
// commit thread; on open a torn last line (no '\n' or not JSON) is
// truncated away. Opening and reading a log runs on a small disk pool.
// Logs are created 0600 and directories 0700 whatever the umask: they hold
// conversations.
#include "store/jsonl_store.hpp"

#include "detail/group_commit.hpp"
#include "detail/log_file.hpp"
#include "detail/log_reader.hpp"
#include "store/errc.hpp"
#include "util/json_limits.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <openssl/sha.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <limits>
#include <system_error>

namespace harnessd::store {
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

bool is_plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_';
}

/// Writes every part, retrying short writes, in batches of IOV_MAX.
void write_all(int fd, std::vector<iovec>& iov, const std::string& path) {
  std::size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<std::size_t>(iov.size() - first, IOV_MAX));
    ssize_t n = ::writev(fd, iov.data() + first, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("write " + path);
    }
    auto left = static_cast<std::size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < iov.size()) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
}

iovec as_iovec(std::string_view bytes) { return {const_cast<char*>(bytes.data()), bytes.size()}; }

/// Creates `dir` and its missing parents, each 0700 whatever the umask.
void create_private_directories(const fs::path& dir) {
  std::error_code ec;
  if (dir.empty() || fs::is_directory(dir, ec)) return;
  create_private_directories(dir.parent_path());
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (errno == EEXIST && fs::is_directory(dir, ec)) return;
    throw_errno("create " + dir.string());
  }
  if (::chmod(dir.c_str(), 0700) != 0) throw_errno("chmod " + dir.string());
}

using Mark = detail::LogIndex::Mark;

class JsonlLog final : public SessionLog {
 public:
  /// `end` is where the next line starts; `last_mark` the index's last mark.
  JsonlLog(std::shared_ptr<detail::LogFile> file, json::object header, std::vector<json::object> events,
           detail::GroupCommit& commit, SyncMode mode, Catalog& catalog, Catalog::Handle entry,
           std::shared_ptr<detail::LogIndex> index, std::uint64_t generation, Mark end, Mark last_mark)
      : file_(std::move(file)), header_(std::move(header)), loaded_(std::move(events)),
        commit_(commit), mode_(mode), catalog_(catalog), entry_(entry), index_(std::move(index)),
        generation_(generation), end_(end), last_mark_(last_mark) {}

  const json::object& header() const override { return header_; }
  std::vector<json::object> take_loaded_events() override { return std::move(loaded_); }

  void append(std::span<const std::string_view> events, const LogPosition& at) override {
    iov_.clear();
    marks_.clear();
    Mark line = end_;
    for (std::string_view event : events) {
      iov_.push_back(as_iovec(event));
      iov_.push_back(as_iovec("\n"));
      if (detail::LogIndex::worth_marking(last_mark_, line)) marks_.push_back(last_mark_ = line);
      line = {line.seq + 1, line.offset + event.size() + 1};
    }
    try {
      write_all(file_->fd, iov_, file_->path);
    } catch (...) {
      // Part of a line may be in the file: where lines start is unknown now.
      if (indexing_) index_->reset();
      indexing_ = false;
      throw;
    }
    end_ = line;
    if (indexing_) index_->learn(marks_, end_, generation_);
    if (iov_.capacity() > 4096) std::vector<iovec>().swap(iov_);
    if (marks_.capacity() > 64) std::vector<Mark>().swap(marks_);
    if (mode_ == SyncMode::batch) commit_.mark_dirty();
    catalog_.advance(entry_, at);
  }

  boost::asio::awaitable<void> end_turn() override {
    if (mode_ == SyncMode::turn) co_await commit_.sync(file_);
  }

 private:
  std::shared_ptr<detail::LogFile> file_;
  json::object header_;
  std::vector<json::object> loaded_;
  detail::GroupCommit& commit_;
  const SyncMode mode_;
  Catalog& catalog_;
  Catalog::Handle entry_;
  std::shared_ptr<detail::LogIndex> index_;
  const std::uint64_t generation_;
  Mark end_;        ///< where the next appended line starts
  Mark last_mark_;  ///< the last line start this log gave the index
  bool indexing_ = true;
  std::vector<iovec> iov_;
  std::vector<Mark> marks_;
};

std::string read_file(int fd, const std::string& path) {
  std::string content;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("read " + path);
    }
    if (n == 0) return content;
    content.append(buf, static_cast<std::size_t>(n));
  }
}

std::int64_t int_field(const json::object& obj, std::string_view key, std::int64_t fallback) {
  const json::value* v = obj.if_contains(key);
  return v != nullptr && v->is_int64() ? v->get_int64() : fallback;
}

/// What session/list shows of a log just read whole.
SessionInfo summarize(const json::object& header, const std::vector<json::object>& events) {
  SessionInfo info;
  info.id = std::string(header.at("id").get_string());
  info.created_at_ms = int_field(header, "createdAt", 0);
  info.updated_at_ms = info.created_at_ms;
  if (const json::value* parent = header.if_contains("parentSession"); parent && parent->is_string()) {
    info.parent = std::string(parent->get_string());
  }
  if (!events.empty()) {
    info.last_seq = int_field(events.back(), "seq", -1);
    info.updated_at_ms = int_field(events.back(), "time", info.created_at_ms);
  }
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    const json::value* data = it->if_contains("data");
    const json::value* turn = data && data->is_object() ? data->get_object().if_contains("turn") : nullptr;
    if (turn != nullptr && turn->is_int64()) {
      // A hostile log's turn number must not overflow here (the session
      // itself refuses such a log when it loads).
      const std::int64_t t = turn->get_int64();
      info.turns = t < 0 ? 0 : t == std::numeric_limits<std::int64_t>::max() ? t : t + 1;
      break;
    }
  }
  return info;
}

std::optional<json::object> parse_object(std::string_view line) {
  json::error_code ec;
  // The log limit is above the input limit: what was accepted is readable.
  json::value v = json::parse(line, ec, {}, util::log_parse_options());
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.get_object());
}

}  // namespace

std::string session_file_name(std::string_view session_id) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string name;
  for (unsigned char c : session_id) {
    // A '.' is plain except at the start, so no name is "." or hidden.
    if (is_plain(c) || (c == '.' && !name.empty())) {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += hex[c >> 4];
      name += hex[c & 15];
    }
  }
  constexpr std::size_t max_stem = 200;  // NAME_MAX is 255 on Linux
  if (name.size() > max_stem) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(session_id.data()), session_id.size(), digest);
    name.resize(max_stem - 2 * 16 - 1);
    name += '~';
    for (int i = 0; i < 16; ++i) {
      name += hex[digest[i] >> 4];
      name += hex[digest[i] & 15];
    }
  }
  return name + ".jsonl";
}

std::string_view to_string(SyncMode mode) {
  switch (mode) {
    case SyncMode::turn:
      return "turn";
    case SyncMode::batch:
      return "batch";
    case SyncMode::none:
      return "none";
  }
  return "turn";
}

JsonlStore::JsonlStore(fs::path root, JsonlOptions options)
    : root_(std::move(root)), options_(options) {
  create_private_directories(root_);
  struct stat st {};
  if (::stat(root_.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    spdlog::info("session root {} is open to other users (mode {:o}); logs are created 0600", root_.string(),
                 st.st_mode & 07777);
  }
  root_fd_ = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd_ < 0) throw_errno("open " + root_.string());
  commit_ = std::make_unique<detail::GroupCommit>(root_fd_, options_.sync, options_.sync_interval);
  disk_ = std::make_unique<boost::asio::thread_pool>(2);
}

void JsonlStore::stop() {
  disk_->join();
  commit_.reset();  // syncs what is pending
}

JsonlStore::~JsonlStore() {
  stop();
  ::close(root_fd_);
}

namespace {
// Plain functions, not lambdas: GCC 12 mishandles lambda coroutine captures.
boost::asio::awaitable<std::unique_ptr<SessionLog>> open_on_disk_pool(JsonlStore* store, SessionHeader header,
                                                                      OpenMode mode) {
  co_return store->open_now(header, mode);
}

boost::asio::awaitable<std::optional<EventPage>> read_on_disk_pool(std::string path, std::int64_t after_seq,
                                                                   std::size_t limit, std::size_t max_bytes,
                                                                   std::shared_ptr<detail::LogIndex> index,
                                                                   std::atomic<std::uint64_t>* bytes_read) {
  co_return detail::read_log_page(path, after_seq, limit, max_bytes, index.get(), bytes_read);
}

boost::asio::awaitable<bool> remove_on_disk_pool(JsonlStore* store, std::string id) {
  co_return store->remove_now(id);
}

boost::asio::awaitable<void> scan_on_disk_pool(JsonlStore* store) {
  store->scan_now();
  co_return;
}
}  // namespace

boost::asio::awaitable<std::unique_ptr<SessionLog>> JsonlStore::open(SessionHeader header, OpenMode mode) {
  auto log = co_await boost::asio::co_spawn(disk_->get_executor(),
                                            open_on_disk_pool(this, std::move(header), mode),
                                            boost::asio::use_awaitable);
  co_return log;
}

boost::asio::awaitable<std::optional<EventPage>> JsonlStore::read_events(std::string id, std::int64_t after_seq,
                                                                         std::size_t limit, std::size_t max_bytes) {
  std::string path = (root_ / session_file_name(id)).string();
  std::shared_ptr<detail::LogIndex> index = index_for(path);
  auto page = co_await boost::asio::co_spawn(
      disk_->get_executor(),
      read_on_disk_pool(std::move(path), after_seq, limit, max_bytes, std::move(index), &page_bytes_read_),
      boost::asio::use_awaitable);
  co_return page;
}

boost::asio::awaitable<ListPage> JsonlStore::list(std::optional<std::string> cursor, std::size_t limit) {
  // The first list reads every log's header and tail, once; the catalog is
  // kept current by opens and appends from then on.
  if (!scan_started_.exchange(true)) {
    co_await boost::asio::co_spawn(disk_->get_executor(), scan_on_disk_pool(this), boost::asio::use_awaitable);
  }
  boost::asio::steady_timer wait(co_await boost::asio::this_coro::executor);
  while (!scanned_.load(std::memory_order_acquire)) {
    wait.expires_after(std::chrono::milliseconds(5));
    co_await wait.async_wait(boost::asio::use_awaitable);
  }
  co_return catalog_.page(cursor, limit);
}

boost::asio::awaitable<bool> JsonlStore::remove(std::string id) {
  const bool removed = co_await boost::asio::co_spawn(disk_->get_executor(), remove_on_disk_pool(this, std::move(id)),
                                                      boost::asio::use_awaitable);
  co_return removed;
}

bool JsonlStore::remove_now(const std::string& id) {
  const std::string path = (root_ / session_file_name(id)).string();
  if (::unlink(path.c_str()) != 0) {
    if (errno != ENOENT) throw_errno("remove " + path);
    catalog_.remove(id);
    return false;
  }
  // The directory entry's removal is durable before the answer, as a new
  // log's creation is before its first turn ends.
  if (::fsync(root_fd_) != 0) throw_errno("sync " + root_.string());
  {
    // What readers learned of the old file must not describe a new one.
    std::lock_guard lock(indexes_mutex_);
    indexes_.erase(path);
  }
  catalog_.remove(id);
  return true;
}

std::shared_ptr<detail::LogIndex> JsonlStore::index_for(const std::string& path) {
  // Logs open or being read keep theirs; of the rest, the many are dropped
  // in one sweep, and the next sweep waits until the map doubles.
  constexpr std::size_t min_sweep = 1024;
  std::lock_guard lock(indexes_mutex_);
  auto it = indexes_.find(path);
  if (it != indexes_.end()) return it->second;
  if (indexes_.size() >= next_index_sweep_) {
    std::erase_if(indexes_, [](const auto& entry) { return entry.second.use_count() == 1; });
    next_index_sweep_ = std::max(min_sweep, 2 * indexes_.size());
  }
  auto index = std::make_shared<detail::LogIndex>();
  indexes_.emplace(path, index);
  return index;
}

void JsonlStore::scan_now() {
  std::size_t found = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(root_, ec)) {
    const fs::path& path = entry.path();
    if (path.extension() != ".jsonl" || !entry.is_regular_file(ec)) continue;
    if (std::optional<SessionInfo> info = detail::summarize_log(path.string())) {
      catalog_.found(std::move(*info));
      ++found;
    }
  }
  if (ec) spdlog::warn("session list: reading {}: {}", root_.string(), ec.message());
  spdlog::info("session list: {} logs read from {}", found, root_.string());
  scanned_.store(true, std::memory_order_release);
}

std::unique_ptr<SessionLog> JsonlStore::open_now(const SessionHeader& header, OpenMode mode) {
  const std::string path = (root_ / session_file_name(header.id)).string();
  bool created = false;
  int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && mode == OpenMode::existing) return nullptr;
  if (fd < 0 && errno == ENOENT) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    created = fd >= 0;
  }
  if (fd < 0) throw_errno("open " + path);
  if (created && ::fchmod(fd, 0600) != 0) {
    const int error = errno;
    ::close(fd);
    throw std::system_error(error, std::generic_category(), "chmod " + path);
  }
  auto file = std::make_shared<detail::LogFile>(fd, path, created, open_logs_);
  {
    const std::string content = read_file(fd, path);
    std::optional<json::object> stored_header;
    std::vector<json::object> events;
    std::vector<Mark> marks;  // for the offset index
    Mark last_mark;           // the header's
    std::size_t good_end = 0;  // offset just past the last intact line
    std::size_t pos = 0;
    while (pos < content.size()) {
      const std::size_t newline = content.find('\n', pos);
      const bool complete = newline != std::string::npos;
      const std::string_view line(content.data() + pos,
                                  (complete ? newline : content.size()) - pos);
      std::optional<json::object> parsed = complete ? parse_object(line) : std::nullopt;
      if (!parsed) {
        const bool last = !complete || newline + 1 == content.size();
        if (!last) {
          throw std::system_error(errc::corrupt_line, "corrupt line inside " + path);
        }
        break;  // torn tail: dropped below
      }
      if (!stored_header) {
        stored_header = std::move(*parsed);
      } else {
        events.push_back(std::move(*parsed));
      }
      pos = good_end = newline + 1;
      const Mark next{static_cast<std::int64_t>(events.size()), pos};
      if (detail::LogIndex::worth_marking(last_mark, next)) marks.push_back(last_mark = next);
    }
    if (good_end < content.size() && ::ftruncate(fd, static_cast<off_t>(good_end)) != 0) {
      throw_errno("truncate " + path);
    }
    // After any truncation: what readers learned of the file before is void.
    std::shared_ptr<detail::LogIndex> index = index_for(path);
    const std::uint64_t generation = index->reset();
    Mark end{static_cast<std::int64_t>(events.size()), good_end};
    if (stored_header) {
      const json::value* id = stored_header->if_contains("id");
      if (id == nullptr || !id->is_string() || id->get_string() != header.id) {
        throw std::system_error(errc::foreign_log, path);
      }
    } else {
      stored_header = header.to_json();
      const std::string line = json::serialize(*stored_header);
      std::vector<iovec> parts{as_iovec(line), as_iovec("\n")};
      write_all(fd, parts, path);
      end = {0, line.size() + 1};
    }
    index->learn(marks, end, generation);
    Catalog::Handle entry = catalog_.opened(summarize(*stored_header, events));
    return std::make_unique<JsonlLog>(std::move(file), std::move(*stored_header), std::move(events), *commit_,
                                      options_.sync, catalog_, entry, std::move(index), generation, end,
                                      last_mark);
  }
}

}  // namespace harnessd::store
