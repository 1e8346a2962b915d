#include "server/metrics.hpp"

#include "harness/session_registry.hpp"
#include "store/event_store.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace harnessd::server {

namespace {
std::size_t kind_index(transport::TransportKind kind) { return static_cast<std::size_t>(kind); }
constexpr auto relaxed = std::memory_order_relaxed;

std::size_t count_open_fds() {
  std::error_code ec;
  std::size_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}
}  // namespace

void Metrics::connection_opened(transport::TransportKind kind) {
  open_[kind_index(kind)].fetch_add(1, relaxed);
  accepted_[kind_index(kind)].fetch_add(1, relaxed);
}

void Metrics::connection_closed(transport::TransportKind kind) {
  open_[kind_index(kind)].fetch_sub(1, relaxed);
}

void Metrics::request_answered(std::optional<protocol::Method> method, int code) {
  const std::size_t m = method ? static_cast<std::size_t>(*method) : method_labels - 1;
  for (std::size_t c = 0; c < codes.size(); ++c) {
    if (codes[c] == code) requests_[m][c].fetch_add(1, relaxed);
  }
}

void Metrics::frames_written(std::size_t frames, std::size_t bytes) {
  writes_.fetch_add(1, relaxed);
  frames_.fetch_add(frames, relaxed);
  bytes_out_.fetch_add(bytes, relaxed);
}

std::int64_t Metrics::open_connections() const {
  std::int64_t total = 0;
  for (const auto& n : open_) total += n.load(relaxed);
  return total;
}

double Metrics::uptime_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

std::string Metrics::render_prometheus(harness::SessionRegistry& registry) const {
  const harness::TurnStats& turns = registry.stats();
  std::string out;
  auto add = [&out](std::string_view text) { out += text; };
  const transport::TransportKind kinds[] = {transport::TransportKind::stdio,
                                            transport::TransportKind::tcp, transport::TransportKind::ws};

  add("# HELP harnessd_uptime_seconds Seconds since the daemon started.\n# TYPE harnessd_uptime_seconds gauge\n");
  add(fmt::format("harnessd_uptime_seconds {:.3f}\n", uptime_seconds()));
  add("# HELP harnessd_connections Open client connections.\n# TYPE harnessd_connections gauge\n");
  for (auto kind : kinds) {
    add(fmt::format("harnessd_connections{{transport=\"{}\"}} {}\n", transport::to_string(kind),
                    open_[kind_index(kind)].load(relaxed)));
  }
  add("# HELP harnessd_connections_total Accepted client connections.\n# TYPE harnessd_connections_total counter\n");
  for (auto kind : kinds) {
    add(fmt::format("harnessd_connections_total{{transport=\"{}\"}} {}\n", transport::to_string(kind),
                    accepted_[kind_index(kind)].load(relaxed)));
  }
  add("# HELP harnessd_requests_total Requests answered, by method and JSON-RPC error code (0 = success).\n"
      "# TYPE harnessd_requests_total counter\n");
  for (std::size_t m = 0; m < method_labels; ++m) {
    const std::string_view label = m < protocol::method_names.size() ? protocol::method_names[m] : "other";
    for (std::size_t c = 0; c < codes.size(); ++c) {
      const auto n = requests_[m][c].load(relaxed);
      if (n == 0 && c != 0) continue;
      add(fmt::format("harnessd_requests_total{{method=\"{}\",code=\"{}\"}} {}\n", label, codes[c], n));
    }
  }
  add("# HELP harnessd_notifications_total Notifications written to clients.\n# TYPE harnessd_notifications_total counter\n");
  add(fmt::format("harnessd_notifications_total {}\n", notifications_.load(relaxed)));
  add("# HELP harnessd_frames_written_total Frames (responses and notifications) written.\n# TYPE harnessd_frames_written_total counter\n");
  add(fmt::format("harnessd_frames_written_total {}\n", frames_.load(relaxed)));
  add("# HELP harnessd_writes_total Write operations issued; frames per write = frames_written_total / writes_total.\n"
      "# TYPE harnessd_writes_total counter\n");
  add(fmt::format("harnessd_writes_total {}\n", writes_.load(relaxed)));
  add("# HELP harnessd_bytes_received_total Frame bytes read from clients.\n# TYPE harnessd_bytes_received_total counter\n");
  add(fmt::format("harnessd_bytes_received_total {}\n", bytes_in_.load(relaxed)));
  add("# HELP harnessd_bytes_sent_total Frame bytes written to clients.\n# TYPE harnessd_bytes_sent_total counter\n");
  add(fmt::format("harnessd_bytes_sent_total {}\n", bytes_out_.load(relaxed)));
  add("# HELP harnessd_sessions Sessions loaded now (idle ones are evicted).\n# TYPE harnessd_sessions gauge\n");
  add(fmt::format("harnessd_sessions {}\n", registry.size()));
  add("# HELP harnessd_sessions_evicted_total Idle sessions evicted (log closed, memory freed).\n"
      "# TYPE harnessd_sessions_evicted_total counter\n");
  add(fmt::format("harnessd_sessions_evicted_total {}\n", registry.evicted()));
  add("# HELP harnessd_open_logs Session logs open now.\n# TYPE harnessd_open_logs gauge\n");
  add(fmt::format("harnessd_open_logs {}\n", registry.store().open_logs()));
  add("# HELP harnessd_open_fds File descriptors open in the process.\n# TYPE harnessd_open_fds gauge\n");
  add(fmt::format("harnessd_open_fds {}\n", count_open_fds()));
  add("# HELP harnessd_turns_running Turns holding a running slot (--max-running-turns).\n"
      "# TYPE harnessd_turns_running gauge\n");
  add(fmt::format("harnessd_turns_running {}\n", registry.admission().running()));
  add("# HELP harnessd_turns_queued Prompts waiting for a running slot (--max-queued-turns).\n"
      "# TYPE harnessd_turns_queued gauge\n");
  add(fmt::format("harnessd_turns_queued {}\n", registry.admission().queued()));
  add("# HELP harnessd_turns_active Turns running now.\n# TYPE harnessd_turns_active gauge\n");
  add(fmt::format("harnessd_turns_active {}\n", turns.active.load(relaxed)));
  add("# HELP harnessd_turns_total Turns started.\n# TYPE harnessd_turns_total counter\n");
  add(fmt::format("harnessd_turns_total {}\n", turns.total.load(relaxed)));
  add("# HELP harnessd_subscriptions session/subscribe subscriptions open now.\n"
      "# TYPE harnessd_subscriptions gauge\n");
  add(fmt::format("harnessd_subscriptions {}\n", subscriptions_.load(std::memory_order_relaxed)));
  add("# HELP harnessd_subscribers_cut_total Connections closed because their subscribed events "
      "exceeded --subscriber-max-bytes.\n# TYPE harnessd_subscribers_cut_total counter\n");
  add(fmt::format("harnessd_subscribers_cut_total {}\n", subscribers_cut_.load(std::memory_order_relaxed)));
  add("# HELP harnessd_overlap_rejections_total Prompts refused because the session was busy.\n"
      "# TYPE harnessd_overlap_rejections_total counter\n");
  add(fmt::format("harnessd_overlap_rejections_total {}\n", turns.overlap_rejections.load(relaxed)));
  add("# HELP harnessd_turn_duration_seconds Turn duration.\n# TYPE harnessd_turn_duration_seconds histogram\n");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < turns.duration_buckets.size(); ++i) {
    cumulative += turns.duration_counts[i].load(relaxed);
    add(fmt::format("harnessd_turn_duration_seconds_bucket{{le=\"{}\"}} {}\n", turns.duration_buckets[i], cumulative));
  }
  cumulative += turns.duration_counts.back().load(relaxed);
  add(fmt::format("harnessd_turn_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", cumulative));
  add(fmt::format("harnessd_turn_duration_seconds_sum {:.6f}\n", turns.duration_sum_us.load(relaxed) / 1e6));
  add(fmt::format("harnessd_turn_duration_seconds_count {}\n", cumulative));
  add(registry.store().metrics());
  return out;
}

}  // namespace harnessd::server
