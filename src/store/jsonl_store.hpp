// The embedded default store: one JSONL file per session under a root
// directory; header line, then one event per line. Appends go to the OS at
// once; durability comes from a group commit thread (docs/protocol.md §7).
#pragma once

#include "store/event_store.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace boost::asio {
class thread_pool;
}

namespace harnessd::store {

namespace detail {
class GroupCommit;
class LogIndex;
}

struct JsonlOptions {
  SyncMode sync = SyncMode::turn;
  std::chrono::milliseconds sync_interval{100};  ///< SyncMode::batch only
};

class JsonlStore final : public EventStore {
 public:
  /// Creates `root` if needed (each directory it creates 0700). Throws
  /// std::system_error when it cannot.
  explicit JsonlStore(std::filesystem::path root, JsonlOptions options = {});
  ~JsonlStore() override;

  boost::asio::awaitable<std::unique_ptr<SessionLog>> open(SessionHeader header, OpenMode mode = OpenMode::create) override;
  boost::asio::awaitable<ListPage> list(std::optional<std::string> cursor, std::size_t limit) override;
  boost::asio::awaitable<std::optional<EventPage>> read_events(std::string id, std::int64_t after_seq,
                                                               std::size_t limit, std::size_t max_bytes) override;
  boost::asio::awaitable<bool> remove(std::string id) override;
  std::string_view kind() const override { return "jsonl"; }
  std::size_t open_logs() const override { return open_logs_.load(std::memory_order_relaxed); }
  void stop() override;

  /// open() on the calling thread (blocking file I/O): for the disk pool
  /// and for tests.
  std::unique_ptr<SessionLog> open_now(const SessionHeader& header, OpenMode mode = OpenMode::create);
  /// Reads every log's header and tail into the catalog (blocking file I/O).
  void scan_now();
  /// remove() on the calling thread (blocking file I/O).
  bool remove_now(const std::string& id);

  const std::filesystem::path& root() const noexcept { return root_; }

  /// Bytes read from logs for session/events pages so far (for tests).
  std::uint64_t page_bytes_read() const { return page_bytes_read_.load(std::memory_order_relaxed); }

 private:
  /// The offset index of the log at `path`, shared by its open log and its
  /// readers; made on first use. Indexes of logs neither open nor being
  /// read are dropped once there are many.
  std::shared_ptr<detail::LogIndex> index_for(const std::string& path);

  std::filesystem::path root_;
  JsonlOptions options_;
  int root_fd_ = -1;
  std::atomic<std::size_t> open_logs_{0};
  Catalog catalog_;
  std::atomic<bool> scan_started_{false};
  std::atomic<bool> scanned_{false};
  std::unique_ptr<detail::GroupCommit> commit_;
  std::unique_ptr<boost::asio::thread_pool> disk_;  ///< opens and reads logs
  std::mutex indexes_mutex_;
  std::unordered_map<std::string, std::shared_ptr<detail::LogIndex>> indexes_;
  std::size_t next_index_sweep_ = 1024;
  std::atomic<std::uint64_t> page_bytes_read_{0};
};

/// The file name a session id is stored under: bytes outside [A-Za-z0-9_-]
/// (and '.') are written as %XX, so any id is a safe, distinct file name;
/// ids whose encoding is too long for a file name end in a SHA-256 digest.
std::string session_file_name(std::string_view session_id);

/// "turn", "batch" or "none".
std::string_view to_string(SyncMode mode);

}  // namespace harnessd::store
