#include "detail/group_commit.hpp"

#include "util/wakeup.hpp"

#include <boost/asio/this_coro.hpp>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace harnessd::store::detail {
namespace asio = boost::asio;

LogFile::LogFile(int fd_, std::string path_, bool created_, std::atomic<std::size_t>& open_count)
    : fd(fd_), path(std::move(path_)), created(created_), open_count_(open_count) {
  open_count_.fetch_add(1, std::memory_order_relaxed);
}

LogFile::~LogFile() {
  ::close(fd);
  open_count_.fetch_sub(1, std::memory_order_relaxed);
}

struct GroupCommit::Request {
  std::shared_ptr<LogFile> file;
  std::shared_ptr<util::Wakeup> wakeup;
  std::atomic<bool> done{false};
  int error = 0;  // written before `done`, read after it
};

GroupCommit::GroupCommit(int root_fd, SyncMode mode, std::chrono::milliseconds interval)
    : root_fd_(root_fd), mode_(mode), interval_(interval) {
  if (mode_ != SyncMode::none) thread_ = std::thread([this] { run(); });
}

GroupCommit::~GroupCommit() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

asio::awaitable<void> GroupCommit::sync(std::shared_ptr<LogFile> file) {
  auto request = std::make_shared<Request>();
  request->file = std::move(file);
  request->wakeup = util::Wakeup::create(co_await asio::this_coro::executor);
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(request);
  }
  wake_.notify_one();
  while (!request->done.load(std::memory_order_acquire)) co_await request->wakeup->wait();
  if (request->error != 0) {
    throw std::system_error(request->error, std::generic_category(), "sync " + request->file->path);
  }
}

void GroupCommit::mark_dirty() {
  std::lock_guard lock(mutex_);
  dirty_ = true;
}

std::uint64_t GroupCommit::rounds() const {
  std::lock_guard lock(mutex_);
  return rounds_;
}

void GroupCommit::run() {
  std::vector<std::shared_ptr<Request>> round;
  std::unique_lock lock(mutex_);
  for (;;) {
    if (mode_ == SyncMode::batch) {
      wake_.wait_for(lock, interval_, [this] { return stopping_; });
    } else {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    }
    // Stopping still syncs what is pending: a clean exit loses nothing.
    const bool stopping = stopping_;
    const bool dirty = std::exchange(dirty_, false);
    round.swap(queue_);
    if (round.empty() && !dirty) {
      if (stopping) return;
      continue;
    }
    ++rounds_;
    lock.unlock();
    if (round.empty()) {
      if (::syncfs(root_fd_) != 0) spdlog::error("syncfs of the session root failed: {}", std::strerror(errno));
    } else {
      sync_round(round);
    }
    round.clear();
    lock.lock();
    if (stopping && queue_.empty()) return;
  }
}

void GroupCommit::sync_round(std::vector<std::shared_ptr<Request>>& round) {
  bool one_file = true;
  for (const auto& request : round) one_file = one_file && request->file == round.front()->file;
  int error = 0;
  if (one_file) {
    LogFile& file = *round.front()->file;
    if (::fdatasync(file.fd) != 0) error = errno;
    // A new file's name lives in the directory: sync it once, too.
    if (error == 0 && file.created.exchange(false) && ::fsync(root_fd_) != 0) error = errno;
  } else {
    if (::syncfs(root_fd_) != 0) error = errno;
    if (error == 0) {
      for (const auto& request : round) request->file->created.store(false);
    }
  }
  for (const auto& request : round) {
    request->error = error;
    request->done.store(true, std::memory_order_release);
    request->wakeup->notify();
  }
}

}  // namespace harnessd::store::detail
