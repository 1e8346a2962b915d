#include "util/systemd.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace harnessd::util::systemd {

namespace {

std::string_view env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string_view(value) : std::string_view();
}

template <class Int>
bool parse(std::string_view text, Int& out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

bool notify(std::string_view state) {
  const std::string_view path = env("NOTIFY_SOCKET");
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  if (path[0] == '@') address.sun_path[0] = '\0';  // an abstract socket
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const ssize_t sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                                reinterpret_cast<const sockaddr*>(&address), length);
  ::close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

std::chrono::microseconds watchdog_interval() {
  std::uint64_t usec = 0;
  if (!parse(env("WATCHDOG_USEC"), usec) || usec == 0) return {};
  if (const std::string_view pid = env("WATCHDOG_PID"); !pid.empty()) {
    pid_t owner = 0;
    if (!parse(pid, owner) || owner != ::getpid()) return {};
  }
  return std::chrono::microseconds(usec);
}

std::vector<ListenFd> take_listen_fds() {
  std::vector<ListenFd> fds;
  pid_t pid = 0;
  int count = 0;
  if (parse(env("LISTEN_PID"), pid) && pid == ::getpid() && parse(env("LISTEN_FDS"), count) && count > 0) {
    std::string_view names = env("LISTEN_FDNAMES");
    constexpr int first_fd = 3;  // SD_LISTEN_FDS_START
    for (int i = 0; i < count; ++i) {
      const std::size_t colon = names.find(':');
      std::string name(names.substr(0, colon));
      names = colon == std::string_view::npos ? std::string_view() : names.substr(colon + 1);
      const int fd = first_fd + i;
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      fds.push_back(ListenFd{fd, std::move(name)});
    }
  }
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  return fds;
}

}  // namespace harnessd::util::systemd
