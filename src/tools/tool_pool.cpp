#include "tools/tool_pool.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <exception>

namespace harnessd::tools {
namespace asio = boost::asio;

ToolPool::ToolPool(unsigned threads, int niceness) : io_(1), work_(asio::make_work_guard(io_)) {
  for (unsigned i = 0; i < threads; ++i) {
    threads_.emplace_back([this, niceness] {
      // Linux's nice is per thread: only these threads yield to the I/O ones.
      if (niceness != 0) ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), niceness);
      io_.run();
    });
  }
}

ToolPool::~ToolPool() { stop(); }

void ToolPool::stop() {
  work_.reset();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

asio::awaitable<ToolResult> ToolPool::run(std::function<ToolResult()> work) {
  auto initiate = [this](auto handler, std::function<ToolResult()> job) {
    asio::post(io_, [handler = std::move(handler), job = std::move(job)]() mutable {
      std::exception_ptr failure;
      ToolResult result;
      try {
        result = job();
      } catch (...) {
        failure = std::current_exception();
      }
      // Back to the caller's executor (its session strand).
      auto executor = asio::get_associated_executor(handler);
      asio::post(executor, [handler = std::move(handler), failure, result = std::move(result)]() mutable {
        std::move(handler)(failure, std::move(result));
      });
    });
  };
  ToolResult result = co_await asio::async_initiate<decltype(asio::use_awaitable), void(std::exception_ptr, ToolResult)>(
      initiate, asio::use_awaitable, std::move(work));
  co_return result;
}

}  // namespace harnessd::tools
