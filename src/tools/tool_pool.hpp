// Where tools do blocking work (file reads, directory walks, regex scans):
// a small thread pool of its own, so no I/O thread ever waits on a disk and
// a session that greps a large tree never delays another's notifications.
#pragma once

#include "tools/tool.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <functional>

namespace harnessd::tools {

class ToolPool {
 public:
  explicit ToolPool(unsigned threads);
  ~ToolPool();

  /// Runs `work` on the pool and resumes the caller on its own executor.
  /// An exception from `work` is rethrown in the caller.
  boost::asio::awaitable<ToolResult> run(std::function<ToolResult()> work);

  /// Waits for the work in flight and stops the threads.
  void stop();

 private:
  boost::asio::thread_pool pool_;
};

}  // namespace harnessd::tools
