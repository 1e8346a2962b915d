// Crash safety: appends go straight to the OS with write(2) (a kill -9 loses
// nothing a client has seen); sync() is fdatasync at turn end; on open a torn
// last line (no '\n' or not JSON) is truncated away.
#include "harnessd/store/jsonl_store.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <openssl/sha.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace harnessd::store {
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

bool is_plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_';
}

void write_all(int fd, const iovec* parts, int count, const std::string& path) {
  iovec iov[2];
  std::copy(parts, parts + count, iov);
  int first = 0;
  while (first < count) {
    ssize_t n = ::writev(fd, iov + first, count - first);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("write " + path);
    }
    auto left = static_cast<std::size_t>(n);
    while (first < count && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < count) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
}

class JsonlLog final : public SessionLog {
 public:
  JsonlLog(int fd, std::string path, json::object header, std::vector<json::object> events)
      : fd_(fd), path_(std::move(path)), header_(std::move(header)), loaded_(std::move(events)) {}
  ~JsonlLog() override { ::close(fd_); }

  const json::object& header() const override { return header_; }
  std::vector<json::object> take_loaded_events() override { return std::move(loaded_); }

  void append(std::string_view event_json) override {
    iovec parts[2] = {{const_cast<char*>(event_json.data()), event_json.size()},
                      {const_cast<char*>("\n"), 1}};
    write_all(fd_, parts, 2, path_);
  }

  void sync() override {
    if (::fdatasync(fd_) != 0) throw_errno("fdatasync " + path_);
  }

 private:
  int fd_;
  std::string path_;
  json::object header_;
  std::vector<json::object> loaded_;
};

std::string read_file(int fd, const std::string& path) {
  std::string content;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("read " + path);
    }
    if (n == 0) return content;
    content.append(buf, static_cast<std::size_t>(n));
  }
}

std::optional<json::object> parse_object(std::string_view line) {
  json::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.get_object());
}

}  // namespace

std::string session_file_name(std::string_view session_id) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string name;
  for (unsigned char c : session_id) {
    // A '.' is plain except at the start, so no name is "." or hidden.
    if (is_plain(c) || (c == '.' && !name.empty())) {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += hex[c >> 4];
      name += hex[c & 15];
    }
  }
  constexpr std::size_t max_stem = 200;  // NAME_MAX is 255 on Linux
  if (name.size() > max_stem) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(session_id.data()), session_id.size(), digest);
    name.resize(max_stem - 2 * 16 - 1);
    name += '~';
    for (int i = 0; i < 16; ++i) {
      name += hex[digest[i] >> 4];
      name += hex[digest[i] & 15];
    }
  }
  return name + ".jsonl";
}

JsonlStore::JsonlStore(fs::path root) : root_(std::move(root)) {
  fs::create_directories(root_);
}

std::unique_ptr<SessionLog> JsonlStore::open(const SessionHeader& header) {
  const std::string path = (root_ / session_file_name(header.id)).string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno("open " + path);
  try {
    const std::string content = read_file(fd, path);
    std::optional<json::object> stored_header;
    std::vector<json::object> events;
    std::size_t good_end = 0;  // offset just past the last intact line
    std::size_t pos = 0;
    while (pos < content.size()) {
      const std::size_t newline = content.find('\n', pos);
      const bool complete = newline != std::string::npos;
      const std::string_view line(content.data() + pos,
                                  (complete ? newline : content.size()) - pos);
      std::optional<json::object> parsed = complete ? parse_object(line) : std::nullopt;
      if (!parsed) {
        const bool last = !complete || newline + 1 == content.size();
        if (!last) {
          throw std::system_error(std::make_error_code(std::errc::illegal_byte_sequence),
                                  "corrupt line inside " + path);
        }
        break;  // torn tail: dropped below
      }
      if (!stored_header) {
        stored_header = std::move(*parsed);
      } else {
        events.push_back(std::move(*parsed));
      }
      pos = good_end = newline + 1;
    }
    if (good_end < content.size() && ::ftruncate(fd, static_cast<off_t>(good_end)) != 0) {
      throw_errno("truncate " + path);
    }
    if (stored_header) {
      const json::value* id = stored_header->if_contains("id");
      if (id == nullptr || !id->is_string() || id->get_string() != header.id) {
        throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                                path + " belongs to another session id");
      }
    } else {
      stored_header = header.to_json();
      const std::string line = json::serialize(*stored_header);
      iovec parts[2] = {{const_cast<char*>(line.data()), line.size()},
                        {const_cast<char*>("\n"), 1}};
      write_all(fd, parts, 2, path);
    }
    return std::make_unique<JsonlLog>(fd, path, std::move(*stored_header), std::move(events));
  } catch (...) {
    ::close(fd);
    throw;
  }
}

}  // namespace harnessd::store
