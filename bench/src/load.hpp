// What one harness-bench run is asked to do (Options) and what it measured
// (Results), plus the three drivers: load, idle connections, idle sessions.
#pragma once

#include "client_transport.hpp"
#include "histogram.hpp"

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bench {

struct Options {
  Target target;
  std::string target_url;  ///< as given, for the report
  int connections = 1;
  int sessions = 1;  ///< per connection
  int chunks = 10;
  int bytes = 64;
  int delay_ms = 0;  ///< @delay before each chunk: a model-paced turn
  double duration = 5;  ///< seconds measured
  double warmup = 1;    ///< seconds before the measurement
  double rate = 0;      ///< total prompts/s (open loop); 0 = closed loop
  int threads = 1;
  std::vector<pid_t> server_pids;
  std::string metrics_url;
  std::string json_path;
  std::string label;
  int subscribers = 0;  ///< connections that follow session 0 of connection 0
  int idle_connections = 0;
  int idle_sessions = 0;
  double idle_hold = 3;       ///< seconds the idle connections/sessions are held before sampling
  double drain_timeout = 30;  ///< seconds after the end for in-flight turns to finish
  std::size_t read_buffer = 0;  ///< 0: chosen from the connection count
  bool smoke = false;
  bool verbose = false;
};

struct LatencySummary {
  std::uint64_t count = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0, p999_us = 0, max_us = 0, mean_us = 0;
};
LatencySummary summarize(const Histogram& h);

struct Results {
  std::string mode;  ///< "load", "idle-connections", "idle-sessions"
  // counted inside the measurement window
  double window_seconds = 0;
  std::uint64_t prompts = 0;  ///< answered (verified ok) in the window
  std::uint64_t notifications = 0;
  std::uint64_t bytes = 0;
  double prompts_per_s = 0, notifications_per_s = 0, mb_per_s = 0;
  // whole run
  std::uint64_t prompts_sent = 0;
  std::uint64_t prompts_answered = 0;
  std::uint64_t notifications_total = 0;
  std::uint64_t bytes_total = 0;
  std::uint64_t slow_frames = 0;  ///< frames that needed the Boost.JSON fallback
  std::uint64_t frames_total = 0;
  std::uint64_t errors = 0;
  std::uint64_t failures = 0;  ///< verification failures
  std::vector<std::string> messages;  ///< the first error / failure messages
  LatencySummary first_notification;
  LatencySummary response;
  // --subscribers
  int subscribers = 0, subscribers_subscribed = 0, subscribers_cut = 0;
  std::uint64_t subscriber_notifications = 0, subscriber_gaps = 0;
  double subscriber_notifications_per_s = 0;
  // the server, from /proc (when a pid is known)
  bool have_server = false;
  double server_cpu_seconds = 0;  ///< in the window
  double server_cpu_ms_per_1k_notifications = 0;
  std::uint64_t server_rss_before_kib = 0, server_rss_after_kib = 0, server_peak_rss_kib = 0;
  // the client itself
  double client_cpu_seconds = 0;  ///< in the window
  /// Cores' worth of CPU that neither the server nor the bench used during the
  /// window (other processes, hypervisor steal, unattributed softirq): a
  /// measure of how noisy the machine was. Needs the server pid.
  double other_cpu_cores = 0;
  bool have_other = false;
  // harnessd /metrics
  bool have_metrics = false;
  std::string metrics_error;
  std::uint64_t frames_written = 0, writes = 0;
  double frames_per_write = 0, writes_per_notification = 0;
  // idle modes
  int idle_count = 0;
  double idle_rss_delta_kib = 0;
  double idle_bytes_per_item = 0;
};

Results run_load(const Options& opt);
Results run_idle_connections(const Options& opt);
Results run_idle_sessions(const Options& opt);

}  // namespace bench
