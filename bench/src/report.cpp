// Renders harness-bench results: the table a person reads after a run and the
// JSON document run.sh aggregates into RESULTS.md.
#include "report.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

namespace bench {
namespace json = boost::json;

namespace {

std::string target_kind(const Options& opt) {
  switch (opt.target.kind) {
    case Target::Kind::tcp:
      return "tcp";
    case Target::Kind::ws:
      return "ws";
    case Target::Kind::stdio:
      return "stdio";
  }
  return "?";
}

std::string mib(std::uint64_t kib) { return fmt::format("{:.1f} MiB", static_cast<double>(kib) / 1024.0); }

std::string latency_row(std::string_view name, const LatencySummary& s) {
  return fmt::format("  {:<14}{:>10.1f}{:>10.1f}{:>10.1f}{:>10.1f}{:>10.1f}{:>10.1f}{:>10}\n", name, s.p50_us,
                     s.p90_us, s.p99_us, s.p999_us, s.max_us, s.mean_us, s.count);
}

json::object latency_json(const LatencySummary& s) {
  return json::object{{"count", s.count}, {"p50", s.p50_us},  {"p90", s.p90_us}, {"p99", s.p99_us},
                      {"p999", s.p999_us}, {"max", s.max_us}, {"mean", s.mean_us}};
}

}  // namespace

void print_report(std::ostream& out, const Options& opt, const Results& r) {
  std::string text;
  auto add = [&text](std::string s) { text += s; };
  add(fmt::format("harness-bench  {}  {}{}\n", r.mode, opt.target_url,
                  opt.label.empty() ? "" : "  [" + opt.label + "]"));
  if (r.mode == "load") {
    add(fmt::format("load          N={} connection(s) x M={} session(s), \"@chunks {} {}{}\", {}, {} s warmup + {} s measured, "
                    "{} client thread(s)\n",
                    opt.connections, opt.sessions, opt.chunks, opt.bytes,
                    opt.delay_ms > 0 ? fmt::format(" @delay {}", opt.delay_ms) : std::string(),
                    opt.rate > 0 ? fmt::format("open loop {} prompts/s", opt.rate) : std::string("closed loop"),
                    opt.warmup, opt.duration, opt.threads));
    add(fmt::format("throughput    {:.0f} prompts/s   {:.0f} notifications/s   {:.1f} MB/s received\n", r.prompts_per_s,
                    r.notifications_per_s, r.mb_per_s));
    add(fmt::format("latency (us)  {:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}\n", "p50", "p90", "p99", "p99.9", "max",
                    "mean", "count"));
    add(latency_row("first notif.", r.first_notification));
    add(latency_row("response", r.response));
    if (r.have_server) {
      add(fmt::format("server        CPU {:.3f} s in the window ({:.3f} ms per 1k notifications), RSS {} -> {}, peak {}\n",
                      r.server_cpu_seconds, r.server_cpu_ms_per_1k_notifications, mib(r.server_rss_before_kib),
                      mib(r.server_rss_after_kib), mib(r.server_peak_rss_kib)));
    } else {
      add("server        (no pid: CPU and RSS not sampled)\n");
    }
    if (r.subscribers > 0) {
      add(fmt::format("subscribers   {} of {} subscribed, {} cut off; {:.0f} notifications/s delivered to them, "
                      "{} seq gaps\n",
                      r.subscribers_subscribed, r.subscribers, r.subscribers_cut, r.subscriber_notifications_per_s,
                      r.subscriber_gaps));
    }
    if (r.have_metrics) {
      add(fmt::format("writes        {} frames in {} writes: {:.2f} frames/write, {:.4f} writes/notification\n",
                      r.frames_written, r.writes, r.frames_per_write, r.writes_per_notification));
    } else if (!r.metrics_error.empty()) {
      add(fmt::format("writes        metrics unavailable: {}\n", r.metrics_error));
    }
    add(fmt::format("client        CPU {:.3f} s in the window ({:.0f}% of one core)\n", r.client_cpu_seconds,
                    100.0 * r.client_cpu_seconds / opt.duration));
    if (r.have_other) {
      add(fmt::format("machine       other CPU use in the window: {:.2f} cores (other processes, steal, softirq)\n",
                      r.other_cpu_cores));
    }
  } else {
    const char* what = r.mode == "idle-connections" ? "connection" : "session";
    add(fmt::format("idle          {} {}s held {} s\n", r.idle_count, what, opt.idle_hold));
    if (r.have_server) {
      add(fmt::format("server RSS    {} -> {} (peak {}): {:+.0f} KiB, {:.0f} bytes per {}\n", mib(r.server_rss_before_kib),
                      mib(r.server_rss_after_kib), mib(r.server_peak_rss_kib), r.idle_rss_delta_kib,
                      r.idle_bytes_per_item, what));
    }
  }
  add(fmt::format("checks        prompts sent {}, answered {}, notifications {}, frames {} ({} via the JSON fallback)\n",
                  r.prompts_sent, r.prompts_answered, r.notifications_total, r.frames_total, r.slow_frames));
  add(fmt::format("result        errors {}, verification failures {} -> {}\n", r.errors, r.failures,
                  r.errors + r.failures == 0 ? "PASS" : "FAIL"));
  for (const std::string& m : r.messages) add("  ! " + m + "\n");
  out << text << std::flush;
}

void write_json(const std::string& path, const Options& opt, const Results& r) {
  json::object o;
  o["mode"] = r.mode;
  o["label"] = opt.label;
  o["target"] = opt.target_url;
  o["transport"] = target_kind(opt);
  o["connections"] = opt.connections;
  o["sessions"] = opt.sessions;
  o["chunks"] = opt.chunks;
  o["bytes"] = opt.bytes;
  o["delay_ms"] = opt.delay_ms;
  o["duration"] = opt.duration;
  o["warmup"] = opt.warmup;
  o["rate"] = opt.rate;
  o["threads"] = opt.threads;
  o["window_seconds"] = r.window_seconds;
  o["prompts"] = r.prompts;
  o["notifications"] = r.notifications;
  o["bytes_received"] = r.bytes;
  o["prompts_per_s"] = r.prompts_per_s;
  o["subscribers"] = r.subscribers;
  o["subscribers_subscribed"] = r.subscribers_subscribed;
  o["subscribers_cut"] = r.subscribers_cut;
  o["subscriber_notifications_per_s"] = r.subscriber_notifications_per_s;
  o["subscriber_gaps"] = r.subscriber_gaps;
  o["notifications_per_s"] = r.notifications_per_s;
  o["mb_per_s"] = r.mb_per_s;
  o["prompts_sent"] = r.prompts_sent;
  o["prompts_answered"] = r.prompts_answered;
  o["notifications_total"] = r.notifications_total;
  o["bytes_total"] = r.bytes_total;
  o["frames_total"] = r.frames_total;
  o["slow_frames"] = r.slow_frames;
  o["errors"] = r.errors;
  o["verification_failures"] = r.failures;
  json::array messages;
  for (const std::string& m : r.messages) messages.emplace_back(m);
  o["messages"] = std::move(messages);
  o["latency_first_notification_us"] = latency_json(r.first_notification);
  o["latency_response_us"] = latency_json(r.response);
  if (r.have_server) {
    o["server_cpu_seconds"] = r.server_cpu_seconds;
    o["server_cpu_ms_per_1k_notifications"] = r.server_cpu_ms_per_1k_notifications;
    o["server_rss_before_kib"] = r.server_rss_before_kib;
    o["server_rss_after_kib"] = r.server_rss_after_kib;
    o["server_peak_rss_kib"] = r.server_peak_rss_kib;
  } else {
    o["server_cpu_seconds"] = nullptr;
  }
  o["client_cpu_seconds"] = r.client_cpu_seconds;
  if (r.have_other) {
    o["other_cpu_cores"] = r.other_cpu_cores;
  } else {
    o["other_cpu_cores"] = nullptr;
  }
  if (r.have_metrics) {
    o["frames_written"] = r.frames_written;
    o["writes"] = r.writes;
    o["frames_per_write"] = r.frames_per_write;
    o["writes_per_notification"] = r.writes_per_notification;
  } else {
    o["frames_per_write"] = nullptr;
    o["writes_per_notification"] = nullptr;
    if (!r.metrics_error.empty()) o["metrics_error"] = r.metrics_error;
  }
  if (r.mode != "load") {
    o["idle_count"] = r.idle_count;
    o["idle_rss_delta_kib"] = r.idle_rss_delta_kib;
    o["idle_bytes_per_item"] = r.idle_bytes_per_item;
  }
  o["pass"] = r.errors + r.failures == 0;
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << json::serialize(o) << '\n';
}

}  // namespace bench
