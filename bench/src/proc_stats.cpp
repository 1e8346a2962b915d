// /proc sampling and the /metrics scrape for harness-bench (plain Asio: the
// scrape is one HTTP/1.1 request with Connection: close, read to EOF).
#include "proc_stats.hpp"

#include "harnessd/util/url.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <chrono>
#include <fstream>
#include <sstream>

namespace bench {
namespace asio = boost::asio;

namespace {

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

std::uint64_t status_kib(const std::string& status, std::string_view key) {
  std::size_t at = status.find(key);
  if (at == std::string::npos) return 0;
  at += key.size();
  while (at < status.size() && (status[at] == ' ' || status[at] == '\t' || status[at] == ':')) ++at;
  std::uint64_t v = 0;
  std::from_chars(status.data() + at, status.data() + status.size(), v);
  return v;
}

}  // namespace

ProcSample sample_processes(const std::vector<pid_t>& pids) {
  ProcSample total;
  if (pids.empty()) return total;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  total.ok = true;
  for (pid_t pid : pids) {
    std::string stat;
    std::string status;
    if (!read_file("/proc/" + std::to_string(pid) + "/stat", stat) ||
        !read_file("/proc/" + std::to_string(pid) + "/status", status)) {
      total.ok = false;
      continue;
    }
    // Fields after the command name (which may hold spaces and parens):
    // state(3) ... utime(14) stime(15).
    std::size_t close = stat.rfind(')');
    if (close == std::string::npos) {
      total.ok = false;
      continue;
    }
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    std::uint64_t utime = 0;
    std::uint64_t stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    total.cpu_seconds += static_cast<double>(utime + stime) / ticks;
    total.rss_kib += status_kib(status, "VmRSS");
    total.hwm_kib += status_kib(status, "VmHWM");
  }
  return total;
}

double self_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

double machine_busy_seconds() {
  std::string stat;
  if (!read_file("/proc/stat", stat)) return 0;
  // cpu  user nice system idle iowait irq softirq steal ...
  std::istringstream fields(stat.substr(0, stat.find('\n')));
  std::string label;
  fields >> label;
  std::uint64_t v[8] = {};
  for (std::uint64_t& x : v) fields >> x;
  const std::uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::optional<MetricsSample> fetch_metrics(const std::string& url, std::string& error) {
  static constexpr std::array<std::string_view, 1> schemes{"http"};
  harnessd::util::ParsedUrl parsed = harnessd::util::parse_url(url, {.schemes = schemes, .path = true});
  if (!parsed.url) {
    const harnessd::util::UrlError::Kind kind = parsed.error.kind;
    error = kind == harnessd::util::UrlError::Kind::not_url || kind == harnessd::util::UrlError::Kind::scheme
                ? "metrics url must start with http://"
                : "metrics url: " + parsed.error.reason;
    return std::nullopt;
  }
  const std::string host = parsed.url->host;
  const std::string port = std::to_string(parsed.url->port);
  const std::string hostport = parsed.url->host_port();
  const std::string path = parsed.url->path.empty() ? "/metrics" : parsed.url->target();

  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: " + hostport + "\r\nConnection: close\r\n\r\n";
  std::string body;
  boost::system::error_code failure;
  asio::ip::tcp::resolver resolver(io);
  resolver.async_resolve(host, port, [&](boost::system::error_code ec, asio::ip::tcp::resolver::results_type r) {
    if (ec) {
      failure = ec;
      return;
    }
    asio::async_connect(socket, r, [&](boost::system::error_code ec2, const asio::ip::tcp::endpoint&) {
      if (ec2) {
        failure = ec2;
        return;
      }
      asio::async_write(socket, asio::buffer(request), [&](boost::system::error_code ec3, std::size_t) {
        if (ec3) {
          failure = ec3;
          return;
        }
        asio::async_read(socket, asio::dynamic_buffer(body), [&](boost::system::error_code ec4, std::size_t) {
          if (ec4 && ec4 != asio::error::eof) failure = ec4;
        });
      });
    });
  });
  io.run_for(std::chrono::seconds(3));
  if (!io.stopped()) {
    error = "metrics request timed out";
    return std::nullopt;
  }
  if (failure) {
    error = "metrics request failed: " + failure.message();
    return std::nullopt;
  }
  if (body.rfind("HTTP/1.1 200", 0) != 0 && body.rfind("HTTP/1.0 200", 0) != 0) {
    error = "metrics request: " + body.substr(0, body.find('\r'));
    return std::nullopt;
  }
  auto counter = [&](std::string_view name, std::uint64_t& out) {
    std::string key(1, '\n');  // built stepwise: GCC 12 warns (-Wrestrict) on "\n" + string
    key.append(name);
    key.push_back(' ');
    std::size_t at = body.find(key);
    if (at == std::string::npos) return false;
    at += key.size();
    double v = 0;
    std::from_chars(body.data() + at, body.data() + body.size(), v);
    out = static_cast<std::uint64_t>(v);
    return true;
  };
  MetricsSample sample;
  if (!counter("harnessd_frames_written_total", sample.frames_written) ||
      !counter("harnessd_writes_total", sample.writes)) {
    error = "metrics lack harnessd_frames_written_total / harnessd_writes_total";
    return std::nullopt;
  }
  return sample;
}

std::uint64_t raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur;
}

}  // namespace bench
