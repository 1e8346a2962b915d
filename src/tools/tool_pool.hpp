// Where tools do blocking work (file reads, directory walks, regex scans):
// threads of their own, so no I/O thread ever waits on a disk and a session
// that greps a large tree never delays another's notifications. The threads
// run at a lower CPU priority than the I/O threads: when both want a core,
// streaming wins and the scan waits a little.
#pragma once

#include "tools/tool.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <functional>
#include <optional>
#include <thread>
#include <vector>

namespace harnessd::tools {

class ToolPool {
 public:
  /// `threads` at nice `niceness` (0: the daemon's own priority).
  explicit ToolPool(unsigned threads, int niceness = 10);
  ~ToolPool();

  /// Runs `work` on the pool and resumes the caller on its own executor.
  /// An exception from `work` is rethrown in the caller.
  boost::asio::awaitable<ToolResult> run(std::function<ToolResult()> work);

  /// Finishes the work in flight and stops the threads.
  void stop();

 private:
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
};

}  // namespace harnessd::tools
