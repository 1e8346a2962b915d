// Server-side figures for harness-bench that the server does not report
// itself: CPU seconds and memory from /proc, and the frame/write counters
// from harnessd's Prometheus /metrics endpoint.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bench {

struct ProcSample {
  bool ok = false;
  double cpu_seconds = 0;     ///< utime + stime
  std::uint64_t rss_kib = 0;  ///< VmRSS
  std::uint64_t hwm_kib = 0;  ///< VmHWM (peak RSS)
};

/// Sums over every pid (a --spawn-stdio run has one server per connection).
/// ok is false when any pid could not be read.
ProcSample sample_processes(const std::vector<pid_t>& pids);

/// The bench process's own CPU seconds (user + system, all threads).
double self_cpu_seconds();

/// CPU seconds the whole machine spent busy (or stolen by the hypervisor)
/// since boot, from /proc/stat; with the server's and the bench's own CPU it
/// shows how much other work shared the cores during a measurement.
double machine_busy_seconds();

struct MetricsSample {
  std::uint64_t frames_written = 0;
  std::uint64_t writes = 0;
};

/// GET URL (http://HOST:PORT/PATH) and read harnessd_frames_written_total and
/// harnessd_writes_total; nullopt (with `error` set) on any failure.
std::optional<MetricsSample> fetch_metrics(const std::string& url, std::string& error);

/// Raises RLIMIT_NOFILE to its hard limit; returns the new soft limit.
std::uint64_t raise_fd_limit();

}  // namespace bench
