// Counters about turns, shared by all sessions; read by /healthz and /metrics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace harnessd::harness {

struct TurnStats {
  /// Upper bounds (seconds) of the turn duration histogram buckets.
  static constexpr std::array<double, 10> duration_buckets = {0.001, 0.005, 0.01, 0.05, 0.1,
                                                              0.5,   1.0,   5.0,  30.0, 120.0};
  std::atomic<std::int64_t> active{0};
  std::atomic<std::uint64_t> total{0};
  std::atomic<std::uint64_t> overlap_rejections{0};
  std::array<std::atomic<std::uint64_t>, duration_buckets.size() + 1> duration_counts{};
  std::atomic<std::uint64_t> duration_sum_us{0};

  void record_duration(double seconds) {
    std::size_t i = 0;
    while (i < duration_buckets.size() && seconds > duration_buckets[i]) ++i;
    duration_counts[i].fetch_add(1, std::memory_order_relaxed);
    duration_sum_us.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
  }
};

}  // namespace harnessd::harness
