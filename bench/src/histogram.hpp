// Latency histogram for harness-bench: log-linear buckets (HdrHistogram-like,
// 128 linear sub-buckets per power of two, so any recorded value is known to
// within 0.4%) with O(1) record and cheap merge across client threads.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace bench {

/// Records non-negative integers (the bench uses nanoseconds).
class Histogram {
 public:
  static constexpr int sub_bits = 8;                  // values < 256 are exact
  static constexpr std::uint64_t sub_count = 1u << sub_bits;
  static constexpr std::uint64_t half = sub_count / 2;
  static constexpr int max_shift = 64 - sub_bits;

  Histogram() : counts_(index_of(~std::uint64_t{0}) + 1, 0) {}

  void record(std::uint64_t value) {
    ++counts_[index_of(value)];
    ++total_;
    sum_ += static_cast<double>(value);
    max_ = std::max(max_, value);
    min_ = std::min(min_, value);
  }

  void merge(const Histogram& other) {
    for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
    total_ += other.total_;
    sum_ += other.sum_;
    max_ = std::max(max_, other.max_);
    min_ = std::min(min_, other.min_);
  }

  std::uint64_t count() const { return total_; }
  std::uint64_t max() const { return total_ ? max_ : 0; }
  std::uint64_t min() const { return total_ ? min_ : 0; }
  double mean() const { return total_ ? sum_ / static_cast<double>(total_) : 0.0; }

  /// The value at quantile q (0..1): the midpoint of the bucket holding it,
  /// clamped to the recorded min/max.
  std::uint64_t quantile(double q) const {
    if (total_ == 0) return 0;
    auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total_) + 0.5);
    rank = std::clamp<std::uint64_t>(rank, 1, total_);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) {
        std::uint64_t lo = lower_bound(i);
        std::uint64_t width = bucket_width(i);
        std::uint64_t mid = lo + width / 2;
        return std::clamp(mid, min_, max_);
      }
    }
    return max_;
  }

 private:
  // Index layout: [0, 256) exact; then for shift s >= 1 a block of 128
  // buckets covering [128 << s, 256 << s), each (1 << s) wide.
  static std::size_t index_of(std::uint64_t v) {
    if (v < sub_count) return static_cast<std::size_t>(v);
    int shift = std::bit_width(v) - sub_bits;
    std::uint64_t top = v >> shift;  // in [128, 256)
    return static_cast<std::size_t>(sub_count + static_cast<std::uint64_t>(shift - 1) * half + (top - half));
  }
  static std::uint64_t lower_bound(std::size_t i) {
    if (i < sub_count) return i;
    std::uint64_t k = i - sub_count;
    std::uint64_t shift = k / half + 1;
    std::uint64_t top = k % half + half;
    return top << shift;
  }
  static std::uint64_t bucket_width(std::size_t i) {
    if (i < sub_count) return 1;
    return std::uint64_t{1} << ((i - sub_count) / half + 1);
  }

  std::vector<std::uint64_t> counts_;
  std::uint64_t total_ = 0;
  double sum_ = 0;
  std::uint64_t max_ = 0;
  std::uint64_t min_ = ~std::uint64_t{0};
};

}  // namespace bench
