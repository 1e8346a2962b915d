// harness-bench: the load benchmark for harnessd and its peers (Node reference,
// floor) over TCP, WebSocket or a spawned server's stdio; it verifies every
// turn and reports throughput, latency, server CPU/memory and frames per write.
#include "load.hpp"
#include "proc_stats.hpp"
#include "report.hpp"

#include <CLI/CLI.hpp>

#include <array>
#include <csignal>
#include <iostream>

namespace {

/// tcp://HOST:PORT or ws://HOST:PORT[/]; false when malformed.
bool parse_url(const std::string& url, bench::Target& target) {
  static constexpr std::array<std::string_view, 2> schemes{"tcp", "ws"};
  harnessd::util::ParsedUrl parsed = harnessd::util::parse_url(url, {.schemes = schemes});
  if (!parsed.url) return false;
  target.kind = parsed.url->scheme == "tcp" ? bench::Target::Kind::tcp : bench::Target::Kind::ws;
  target.url = std::move(*parsed.url);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Options opt;
  std::string connect;
  std::string spawn;
  std::vector<int> pids;

  CLI::App app{"harness-bench: load benchmark for harnessd and its bench peers"};
  auto* connect_opt = app.add_option("--connect", connect, "tcp://HOST:PORT or ws://HOST:PORT of a running server");
  auto* spawn_opt =
      app.add_option("--spawn-stdio", spawn, "spawn PATH --stdio --store memory (one per connection) and drive its stdin and stdout");
  connect_opt->excludes(spawn_opt);
  app.add_option("--server-pid", pids, "server pid(s) to sample CPU and RSS from /proc (spawned servers are sampled anyway)");
  app.add_option("--connections,-N", opt.connections, "connections")->check(CLI::PositiveNumber);
  app.add_option("--sessions,-M", opt.sessions, "sessions per connection, distinct ids")->check(CLI::PositiveNumber);
  app.add_option("--chunks,-K", opt.chunks, "text-delta chunks per turn (@chunks K S)")->check(CLI::NonNegativeNumber);
  app.add_option("--bytes,-S", opt.bytes, "bytes per chunk")->check(CLI::PositiveNumber);
  app.add_option("--duration", opt.duration, "seconds measured")->check(CLI::PositiveNumber);
  app.add_option("--warmup", opt.warmup, "seconds of load before the measurement")->check(CLI::NonNegativeNumber);
  app.add_option("--rate", opt.rate,
                 "open loop: total prompts/s, spread evenly over the sessions; latency counts from the scheduled "
                 "send time (default: closed loop, back to back)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", opt.threads, "client io_context threads")->check(CLI::PositiveNumber);
  app.add_option("--metrics-url", opt.metrics_url,
                 "http://HOST:PORT/metrics of harnessd: report frames per write and writes per notification");
  app.add_option("--json", opt.json_path, "write every figure to this JSON file");
  app.add_option("--label", opt.label, "free text copied into the report");
  app.add_option("--delay-ms", opt.delay_ms, "milliseconds before each chunk (@delay): a turn paced like a model")
      ->check(CLI::Range(0, 60'000));
  app.add_option("--subscribers", opt.subscribers,
                 "load mode: N more connections session/subscribe to the first connection's first session and "
                 "check that its events reach them without a gap (harnessd only)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--idle-connections", opt.idle_connections,
                 "memory mode: open N connections, initialize them, hold them idle, report server RSS per connection")
      ->check(CLI::PositiveNumber);
  app.add_option("--idle-sessions", opt.idle_sessions,
                 "memory mode: one connection, N sessions each answer one `hi`, report server RSS per session")
      ->check(CLI::PositiveNumber);
  app.add_option("--idle-hold", opt.idle_hold, "seconds to hold idle connections/sessions before sampling")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--drain-timeout", opt.drain_timeout, "seconds allowed after the end for running turns to answer")
      ->check(CLI::PositiveNumber);
  app.add_option("--read-buffer", opt.read_buffer, "NDJSON read buffer bytes per connection (default by N)");
  app.add_flag("--smoke", opt.smoke, "correctness only: N=2 M=2 K=10 S=16 for 2 s, no warmup");
  app.add_flag("--verbose,-v", opt.verbose, "progress and the spawned servers' stderr on stderr");
  CLI11_PARSE(app, argc, argv);

  if (!connect.empty()) {
    if (!parse_url(connect, opt.target)) {
      std::cerr << "harness-bench: --connect wants tcp://HOST:PORT or ws://HOST:PORT, got " << connect << "\n";
      return 2;
    }
    opt.target_url = connect;
  } else if (!spawn.empty()) {
    opt.target.kind = bench::Target::Kind::stdio;
    opt.target.program = spawn;
    opt.target.child_stderr = opt.verbose;
    opt.target_url = "stdio:" + spawn;
  } else {
    std::cerr << "harness-bench: give --connect URL or --spawn-stdio PATH (--help for more)\n";
    return 2;
  }
  for (int p : pids) opt.server_pids.push_back(static_cast<pid_t>(p));
  if (opt.smoke) {
    opt.connections = 2;
    opt.sessions = 2;
    opt.chunks = 10;
    opt.bytes = 16;
    opt.duration = 2;
    opt.warmup = 0;
    opt.rate = 0;
  }
  if (opt.idle_connections > 0 && opt.target.kind == bench::Target::Kind::stdio) {
    std::cerr << "harness-bench: --idle-connections needs --connect (stdio is one connection per process)\n";
    return 2;
  }
  if (opt.idle_connections > 0 && opt.idle_sessions > 0) {
    std::cerr << "harness-bench: --idle-connections and --idle-sessions are separate runs\n";
    return 2;
  }

  std::signal(SIGPIPE, SIG_IGN);
  const std::uint64_t fds = bench::raise_fd_limit();
  const std::uint64_t needed = static_cast<std::uint64_t>(opt.subscribers) +
                               static_cast<std::uint64_t>(std::max(opt.connections, opt.idle_connections)) *
                                   (opt.target.kind == bench::Target::Kind::stdio ? 2 : 1) +
                               64;
  if (fds != 0 && fds < needed) {
    std::cerr << "harness-bench: the open-file limit is " << fds << ", this run needs about " << needed
              << " (raise ulimit -n)\n";
    return 2;
  }

  bench::Results results;
  try {
    if (opt.idle_connections > 0) {
      results = bench::run_idle_connections(opt);
    } else if (opt.idle_sessions > 0) {
      results = bench::run_idle_sessions(opt);
    } else {
      results = bench::run_load(opt);
    }
    bench::print_report(std::cout, opt, results);
    if (!opt.json_path.empty()) bench::write_json(opt.json_path, opt, results);
  } catch (const std::exception& e) {
    std::cerr << "harness-bench: " << e.what() << "\n";
    return 1;
  }
  return results.errors + results.failures == 0 ? 0 : 1;
}
