// How many written bytes still sit in the kernel, not yet taken by the peer.
// A write completes when the kernel has the bytes, and the kernel may buffer
// megabytes; the write deadline asks whether the peer is taking any.
#pragma once

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <cstdint>

namespace harnessd::transport::detail {

/// Unsent bytes of a TCP socket (SIOCOUTQ) or unread bytes of a pipe
/// (FIONREAD); 0 when the descriptor tells neither (a regular file).
inline std::uint64_t kernel_queued_bytes(int fd) {
  int queued = 0;
  // Sockets answer SIOCOUTQ (where FIONREAD would count incoming bytes);
  // pipes refuse it and answer FIONREAD.
  if (::ioctl(fd, SIOCOUTQ, &queued) == 0) return queued > 0 ? static_cast<std::uint64_t>(queued) : 0;
  queued = 0;
  if (::ioctl(fd, FIONREAD, &queued) == 0 && queued > 0) return static_cast<std::uint64_t>(queued);
  return 0;
}

}  // namespace harnessd::transport::detail
