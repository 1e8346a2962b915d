// Work handed from any thread to one coroutine on a strand of its own (the
// writer's commit groups, the lease rounds). The coroutine takes what is
// queued in groups, sleeps while there is none, and ends once the store
// stops with nothing left. From then on the inbox is closed: work handed in
// fails at once, since nobody would ever answer it.
#pragma once

#include "util/wakeup.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace harnessd::store::pg {

template <class T>
class Inbox {
 public:
  /// `strand`: the executor of the coroutine that takes the work.
  explicit Inbox(boost::asio::any_io_executor strand) : wake_(util::Wakeup::create(std::move(strand))) {}

  /// Any thread. Queues `item` (moved from) and wakes the coroutine. False
  /// once the inbox is closed: `item` is left as it was.
  bool put(T& item) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) return false;
      items_.push_back(std::move(item));
    }
    wake();
    return true;
  }

  /// Any thread: the coroutine looks at the store's `stopping` again.
  void wake() {
    if (wake_) wake_->notify();
  }

  /// The coroutine's strand. Takes items from the front for as long as
  /// `room(item)` says the group has room for one more (`room` counts what
  /// it is asked about). The first item goes whatever `room` says: a group
  /// is never empty while work is queued.
  template <class Room>
  std::vector<T> take(Room&& room) {
    std::vector<T> group;
    std::lock_guard lock(mutex_);
    while (!items_.empty() && (room(items_.front()) || group.empty())) {
      group.push_back(std::move(items_.front()));
      items_.pop_front();
    }
    return group;
  }

  /// The coroutine's strand, when take() found nothing: sleeps until woken.
  /// False when `stopping` is set and nothing is queued: the inbox is closed
  /// then, and the coroutine must end.
  boost::asio::awaitable<bool> wait(const std::atomic<bool>& stopping) {
    if (stopping.load()) {
      std::lock_guard lock(mutex_);
      closed_ = items_.empty();
      co_return !closed_;
    }
    co_await wake_->wait();
    co_return true;
  }

  /// After the io_context's threads have returned: drops what belongs to
  /// it, the wake-up and the work still queued (whose waiters hold
  /// wake-ups of their own).
  void clear() {
    wake_.reset();
    std::lock_guard lock(mutex_);
    items_.clear();
  }

 private:
  std::shared_ptr<util::Wakeup> wake_;
  std::mutex mutex_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace harnessd::store::pg
