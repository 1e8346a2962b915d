// log-floor: the disk work of the jsonl store alone, for the floor under
// its throughput. N logs in one directory; each "turn" appends the same bytes
// a daemon turn appends (events as iovec slices, a writev per batch), then
// waits for its sync; one sync thread syncs every pending turn together
// (syncfs for several logs, fdatasync for one), as the store's group commit
// does. Nothing else runs: no sockets, no JSON, no turn loop. Run it pinned
// to the daemon's core; its CPU time per turn is what persisting costs the
// daemon's core at best.
//
//     log-floor --dir DIR --logs 100 --turn-bytes 17000 --events 110 --seconds 3
//
// Prints one JSON line: turns/s, MB/s, CPU µs per turn (user + system of
// both threads, from getrusage), sync rounds.
//
// With --light-rate R a third thread appends --light-bytes to one of 50
// other logs R times a second, on a fixed schedule, and times each write:
// the floor under a light session's first notification on this disk, which
// waits for its first batch's write (nothing is seen before it is logged).
//
//     log-floor --dir DIR --logs 100 --turn-bytes 2600 --events 14 --light-rate 50
#include "histogram.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  std::string dir;
  int logs = 100;
  std::size_t turn_bytes = 17000;
  int events = 110;
  int events_per_write = 64;
  double seconds = 3;
  bool sync = true;
  double light_rate = 0;  ///< light appends per second (0: none)
  std::size_t light_bytes = 1500;
};

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

/// Appends one turn: `events` lines of equal size, `events_per_write` to a writev.
void append_turn(int fd, const Options& options, const std::string& line) {
  std::vector<iovec> iov;
  int left = options.events;
  while (left > 0) {
    const int batch = std::min({left, options.events_per_write, IOV_MAX});
    iov.assign(static_cast<std::size_t>(batch), iovec{const_cast<char*>(line.data()), line.size()});
    if (::writev(fd, iov.data(), batch) < 0) fail("writev");
    left -= batch;
  }
}

int run(const Options& options) {
  namespace fs = std::filesystem;
  fs::create_directories(options.dir);
  const int dir_fd = ::open(options.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) fail("open " + options.dir);
  std::vector<int> fds;
  for (int i = 0; i < options.logs; ++i) {
    const std::string path = options.dir + "/floor-" + std::to_string(i) + ".jsonl";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) fail("open " + path);
    fds.push_back(fd);
  }
  std::string line(std::max<std::size_t>(2, options.turn_bytes / static_cast<std::size_t>(options.events)), 'x');
  line.back() = '\n';

  // Logs whose last turn is synced (or, without sync, written) and may append again.
  std::mutex mutex;
  std::condition_variable wake_writer, wake_syncer;
  std::vector<int> ready(fds.size()), pending;
  for (std::size_t i = 0; i < fds.size(); ++i) ready[i] = static_cast<int>(i);
  bool stopping = false;
  std::uint64_t turns = 0, rounds = 0;

  std::thread syncer;
  if (options.sync) {
    syncer = std::thread([&] {
      std::vector<int> round;
      std::unique_lock lock(mutex);
      for (;;) {
        wake_syncer.wait(lock, [&] { return stopping || !pending.empty(); });
        if (pending.empty()) return;
        round.swap(pending);
        lock.unlock();
        const int rc = round.size() == 1 ? ::fdatasync(fds[static_cast<std::size_t>(round.front())]) : ::syncfs(dir_fd);
        if (rc != 0) std::perror("sync");
        lock.lock();
        ++rounds;
        turns += round.size();
        ready.insert(ready.end(), round.begin(), round.end());
        round.clear();
        wake_writer.notify_one();
      }
    });
  }

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(options.seconds);
  const double cpu_start = cpu_seconds();

  bench::Histogram light;  // the light appender's write times, ns
  std::thread light_writer;
  std::vector<int> light_fds;
  if (options.light_rate > 0) {
    for (int i = 0; i < 50; ++i) {
      const std::string path = options.dir + "/light-" + std::to_string(i) + ".jsonl";
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
      if (fd < 0) fail("open " + path);
      light_fds.push_back(fd);
    }
    light_writer = std::thread([&] {
      std::string event(std::max<std::size_t>(2, options.light_bytes), 'y');
      event.back() = '\n';
      const auto every = std::chrono::duration<double>(1.0 / options.light_rate);
      auto due = std::chrono::steady_clock::now();
      for (std::size_t n = 0;; ++n) {
        due += std::chrono::duration_cast<std::chrono::steady_clock::duration>(every);
        if (due >= deadline) return;
        std::this_thread::sleep_until(due);
        const auto began = std::chrono::steady_clock::now();
        if (::write(light_fds[n % light_fds.size()], event.data(), event.size()) < 0) fail("write");
        light.record(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - began).count()));
      }
    });
  }
  std::vector<int> batch;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::unique_lock lock(mutex);
      wake_writer.wait(lock, [&] { return !ready.empty(); });
      batch.swap(ready);
    }
    for (const int log : batch) append_turn(fds[static_cast<std::size_t>(log)], options, line);
    std::lock_guard lock(mutex);
    if (options.sync) {
      pending.insert(pending.end(), batch.begin(), batch.end());
      wake_syncer.notify_one();
    } else {
      turns += batch.size();
      ready.insert(ready.end(), batch.begin(), batch.end());
    }
    batch.clear();
  }
  {
    std::lock_guard lock(mutex);
    stopping = true;
    wake_syncer.notify_one();
  }
  if (syncer.joinable()) syncer.join();
  if (light_writer.joinable()) light_writer.join();
  for (const int fd : light_fds) ::close(fd);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = cpu_seconds() - cpu_start;
  for (const int fd : fds) ::close(fd);
  ::close(dir_fd);
  fs::remove_all(options.dir);

  const double bytes_per_turn = static_cast<double>(line.size()) * options.events;
  fmt::print(
      "{{\"logs\":{},\"sync\":{},\"turn_bytes\":{:.0f},\"events_per_turn\":{},\"seconds\":{:.3f},\"turns\":{},"
      "\"turns_per_s\":{:.1f},\"mb_per_s\":{:.2f},\"cpu_seconds\":{:.3f},\"cpu_us_per_turn\":{:.2f},\"sync_rounds\":{}",
      options.logs, options.sync ? "true" : "false", bytes_per_turn, options.events, wall, turns,
      static_cast<double>(turns) / wall, static_cast<double>(turns) * bytes_per_turn / wall / 1e6, cpu,
      turns == 0 ? 0.0 : cpu * 1e6 / static_cast<double>(turns), rounds);
  if (options.light_rate > 0) {
    auto us = [&](double q) { return static_cast<double>(light.quantile(q)) / 1000.0; };
    fmt::print(",\"light_writes\":{},\"light_write_us_p50\":{:.1f},\"light_write_us_p99\":{:.1f},"
               "\"light_write_us_max\":{:.1f}",
               light.count(), us(0.5), us(0.99), static_cast<double>(light.max()) / 1000.0);
  }
  fmt::print("}}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"log-floor: the jsonl store's disk work alone (appends and group syncs), for its throughput floor"};
  app.add_option("--dir", options.dir, "directory for the logs (created; removed afterwards); use the session root's disk")
      ->required();
  app.add_option("--logs", options.logs, "logs (sessions), each one turn in flight")->check(CLI::PositiveNumber);
  app.add_option("--turn-bytes", options.turn_bytes, "bytes a turn appends")->check(CLI::PositiveNumber);
  app.add_option("--events", options.events, "lines (events) a turn appends")->check(CLI::PositiveNumber);
  app.add_option("--events-per-write", options.events_per_write, "lines per writev (the daemon's batch)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seconds", options.seconds, "seconds measured")->check(CLI::PositiveNumber);
  app.add_option("--light-rate", options.light_rate,
                 "a third thread appends to 50 other logs this many times a second, timing each write")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--light-bytes", options.light_bytes, "bytes of each light append")->check(CLI::PositiveNumber);
  bool no_sync = false;
  app.add_flag("--no-sync", no_sync, "append only, no syncs (the daemon's --sync none)");
  CLI11_PARSE(app, argc, argv);
  options.sync = !no_sync;
  try {
    return run(options);
  } catch (const std::exception& e) {
    fmt::print(stderr, "log-floor: {}\n", e.what());
    return 1;
  }
}
