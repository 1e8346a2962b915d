// Shared by the harnesses: invariant checks that survive NDEBUG (the fuzz
// build is RelWithDebInfo) and one way to cut an input into reads, so every
// harness that cares about read boundaries explores them the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

// abort() so libFuzzer records the input and ASan prints the stack.
#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace harnessd::fuzz {

/// Read sizes for a stream: the input's first byte says how many sizes
/// follow (0-7), each size byte gives a read of 1-256 bytes, and the reads
/// cycle over the rest of the input. With no sizes, one byte per read: the
/// hardest split for any framer. Consumes the header bytes from `data`.
inline std::vector<std::size_t> take_read_sizes(std::string_view& data) {
  std::vector<std::size_t> sizes;
  if (data.empty()) return sizes;
  const std::size_t count = static_cast<unsigned char>(data[0]) & 7u;
  data.remove_prefix(1);
  for (std::size_t i = 0; i < count && !data.empty(); ++i) {
    sizes.push_back(static_cast<unsigned char>(data[0]) + std::size_t{1});
    data.remove_prefix(1);
  }
  if (sizes.empty()) sizes.push_back(1);
  return sizes;
}

/// Calls `read(piece)` for consecutive pieces of `data` sized by `sizes`.
template <typename Read>
void for_each_read(std::string_view data, const std::vector<std::size_t>& sizes, Read&& read) {
  for (std::size_t i = 0; !data.empty(); ++i) {
    const std::size_t n = sizes[i % sizes.size()] < data.size() ? sizes[i % sizes.size()] : data.size();
    read(data.substr(0, n), i);
    data.remove_prefix(n);
  }
}

inline std::string_view as_view(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace harnessd::fuzz
