// The parts of systemd's service protocol harnessd speaks, without
// libsystemd: readiness and watchdog notifications (a datagram to
// $NOTIFY_SOCKET, sd_notify(3)) and socket activation (LISTEN_FDS,
// sd_listen_fds(3)). Outside systemd every call is a no-op.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace harnessd::util::systemd {

/// Sends `state` ("READY=1", "STOPPING=1", "WATCHDOG=1", ...) to the
/// service manager. False when $NOTIFY_SOCKET is unset or the send failed.
bool notify(std::string_view state);

/// How often systemd expects WATCHDOG=1 (WATCHDOG_USEC, when WATCHDOG_PID
/// is unset or names this process); zero when the watchdog is off.
std::chrono::microseconds watchdog_interval();

struct ListenFd {
  int fd;            ///< 3, 4, ...
  std::string name;  ///< its FileDescriptorName (LISTEN_FDNAMES), or "" when unnamed
};

/// The sockets systemd passed to this process (LISTEN_PID must be ours).
/// Marks them close-on-exec and removes the variables, so children do not
/// inherit them. Empty without socket activation.
std::vector<ListenFd> take_listen_fds();

}  // namespace harnessd::util::systemd
