// Fuzzes loading and recovery of a session log (store::JsonlStore): the
// input is the log file as found on disk after a crash or a hand edit. A log
// either refuses to open (std::system_error) or opens with the header and
// events that a second open finds again, the torn tail cut away for good.
#include "fuzz_check.hpp"

#include "llm/openai_format.hpp"
#include "store/jsonl_store.hpp"
#include "util/json_limits.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <system_error>

namespace fs = std::filesystem;
namespace json = boost::json;
namespace store = harnessd::store;

namespace {

constexpr std::string_view session_id = "s1";

/// One store for the whole run: a store starts threads, far costlier than
/// the open under test. SyncMode::none: durability is not what is fuzzed.
struct Fixture {
  fs::path dir;
  std::unique_ptr<store::JsonlStore> store;
  fs::path file;

  Fixture() {
    // tmpfs when there is one: on ext4 the truncations of recovery make
    // each run wait for the disk, eight times slower.
    const char* tmp = std::getenv("TMPDIR");
    const std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                              : tmp != nullptr && *tmp != '\0' ? tmp
                                                                : "/tmp";
    std::string pattern = base + "/harnessd-fuzz-XXXXXX";
    FUZZ_CHECK(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    store = std::make_unique<store::JsonlStore>(dir, store::JsonlOptions{.sync = store::SyncMode::none});
    file = dir / store::session_file_name(session_id);
  }
  ~Fixture() {
    store.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

Fixture& fixture() {
  static Fixture f;  // destroyed at exit, which removes the directory
  return f;
}

void write_file(const fs::path& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Equality of two values read from JSON text, except that doubles may
/// differ in their last bits: Boost.JSON 1.81 parses decimal text to the
/// nearest double only approximately, so text that names a double exactly
/// can read back one or two ulps away. Everything else must be equal.
bool same_value(const json::value& a, const json::value& b) {
  if (a.is_double() && b.is_double()) {
    const double x = a.get_double(), y = b.get_double();
    return x == y || std::fabs(x - y) <= 1e-14 * std::fmax(std::fabs(x), std::fabs(y));
  }
  if (a.kind() != b.kind()) return false;
  if (a.is_array()) {
    const json::array &xs = a.get_array(), &ys = b.get_array();
    if (xs.size() != ys.size()) return false;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (!same_value(xs[i], ys[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    const json::object &xs = a.get_object(), &ys = b.get_object();
    if (xs.size() != ys.size()) return false;
    for (const auto& [key, value] : xs) {
      const json::value* other = ys.if_contains(key);
      if (other == nullptr || !same_value(value, *other)) return false;
    }
    return true;
  }
  return a == b;
}

/// A loaded object must serialize to JSON that reads back the same (doubles
/// to within rounding, see same_value). The one known exception: a number
/// beyond double range loads as infinity (1e400) or NaN (0e400), which
/// Boost.JSON writes as `Infinity`/`NaN`. Loaded events only rebuild the
/// conversation today, so that is tolerated, and nothing else is.
void check_serializable(const json::object& object) {
  json::error_code ec;
  const json::value back = json::parse(json::serialize(object), ec, {}, harnessd::util::log_parse_options());
  if (!ec) {
    FUZZ_CHECK(same_value(back, json::value(object)));
    return;
  }
  json::value finite(object);
  FUZZ_CHECK(harnessd::llm::openai::replace_non_finite(finite) > 0);
  json::parse(json::serialize(finite), ec, {}, harnessd::util::log_parse_options());
  FUZZ_CHECK(!ec);
}

/// Session ids come from clients: any id (non-empty, as params require)
/// must map to a safe file name.
void check_file_name(std::string_view id) {
  if (id.empty()) return;
  const std::string name = store::session_file_name(id);
  FUZZ_CHECK(name.size() <= 255 && name.ends_with(".jsonl"));
  FUZZ_CHECK(name.find('/') == std::string::npos && name.find('\0') == std::string::npos);
  FUZZ_CHECK(name.front() != '.');
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string_view content = harnessd::fuzz::as_view(bytes, size);
  check_file_name(content.substr(0, content.find('\n')).substr(0, 300));

  Fixture& f = fixture();
  store::SessionHeader header;
  header.id = std::string(session_id);
  header.created_at_ms = 1;
  write_file(f.file, content);

  json::object stored_header;
  std::vector<json::object> events;
  try {
    auto log = f.store->open_now(header);
    stored_header = log->header();
    events = log->take_loaded_events();
  } catch (const std::system_error&) {
    fs::remove(f.file);
    return 0;
  }
  FUZZ_CHECK(stored_header.at("id") == json::string_view(session_id.data(), session_id.size()));
  check_serializable(stored_header);
  for (const json::object& event : events) check_serializable(event);

  // Recovery is final: the file now holds whole lines only, and opening it
  // again finds the same log without changing it.
  const std::string recovered = read_file(f.file);
  FUZZ_CHECK(!recovered.empty() && recovered.back() == '\n');
  // Either the intact prefix of the input, or (no intact line at all) a
  // fresh header in place of the torn bytes.
  FUZZ_CHECK(content.starts_with(recovered) || recovered == json::serialize(header.to_json()) + "\n");
  {
    // Compared as text: Boost.JSON 1.81 reads "0e400" as NaN, never equal
    // to itself.
    auto again = f.store->open_now(header);
    FUZZ_CHECK(json::serialize(again->header()) == json::serialize(stored_header));
    const std::vector<json::object> reloaded = again->take_loaded_events();
    FUZZ_CHECK(reloaded.size() == events.size());
    for (std::size_t i = 0; i < events.size(); ++i) {
      FUZZ_CHECK(json::serialize(reloaded[i]) == json::serialize(events[i]));
    }
  }
  FUZZ_CHECK(read_file(f.file) == recovered);
  fs::remove(f.file);
  return 0;
}
