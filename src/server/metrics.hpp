// Daemon-wide counters, lock-free, updated on hot paths and rendered by
// /healthz and /metrics.
#pragma once

#include "harnessd/protocol/methods.hpp"
#include "harnessd/transport/frame_transport.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace harnessd::harness {
class SessionRegistry;
}

namespace harnessd::server {

class Metrics {
 public:
  /// Request counters are labelled by the protocol's methods, and "other"
  /// for unknown methods and frames that were not a request.
  static constexpr std::size_t method_labels = protocol::method_names.size() + 1;
  /// 0 is success; the rest are the protocol's error codes.
  static constexpr std::array<int, 11> codes = {0,      -32700, -32600, -32601, -32602, -32603,
                                                -32001, -32002, -32003, -32004, -32005};

  Metrics() : started_(std::chrono::steady_clock::now()) {}

  void connection_opened(transport::TransportKind kind);
  void connection_closed(transport::TransportKind kind);
  /// `method`: nullopt for "other".
  void request_answered(std::optional<protocol::Method> method, int code);
  void frames_written(std::size_t frames, std::size_t bytes);
  void notifications_queued(std::size_t n) { notifications_.fetch_add(n, std::memory_order_relaxed); }
  void bytes_read(std::size_t bytes) { bytes_in_.fetch_add(bytes, std::memory_order_relaxed); }
  void subscription_opened() { subscriptions_.fetch_add(1, std::memory_order_relaxed); }
  void subscription_closed() { subscriptions_.fetch_sub(1, std::memory_order_relaxed); }
  void subscriber_cut() { subscribers_cut_.fetch_add(1, std::memory_order_relaxed); }

  std::int64_t open_connections() const;
  double uptime_seconds() const;
  std::uint64_t writes() const { return writes_.load(std::memory_order_relaxed); }
  std::uint64_t frames() const { return frames_.load(std::memory_order_relaxed); }

  /// Prometheus text exposition format, version 0.0.4.
  std::string render_prometheus(harness::SessionRegistry& sessions) const;

 private:
  std::chrono::steady_clock::time_point started_;
  std::array<std::atomic<std::int64_t>, 3> open_{};
  std::array<std::atomic<std::uint64_t>, 3> accepted_{};
  std::array<std::array<std::atomic<std::uint64_t>, codes.size()>, method_labels> requests_{};
  std::atomic<std::uint64_t> notifications_{0};
  std::atomic<std::uint64_t> frames_{0};
  std::atomic<std::uint64_t> writes_{0};
  std::atomic<std::uint64_t> bytes_in_{0};
  std::atomic<std::uint64_t> bytes_out_{0};
  std::atomic<std::int64_t> subscriptions_{0};
  std::atomic<std::uint64_t> subscribers_cut_{0};
};

}  // namespace harnessd::server
