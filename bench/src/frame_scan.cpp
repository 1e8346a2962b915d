// The fast string-scan classifier for server frames and its Boost.JSON
// fallback; see frame_scan.hpp for the layout the fast path expects.
#include "frame_scan.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <cstring>

namespace bench {
namespace {

constexpr std::string_view event_prefix =
    R"({"jsonrpc":"2.0","method":"session.event","params":{"sessionId":")";
constexpr std::string_view response_prefix = R"({"jsonrpc":"2.0","id":)";

/// A tiny cursor over the frame; every step fails softly (returns false).
struct Cursor {
  const char* p;
  const char* end;

  bool literal(std::string_view s) {
    if (static_cast<std::size_t>(end - p) < s.size() || std::memcmp(p, s.data(), s.size()) != 0) return false;
    p += s.size();
    return true;
  }
  /// A string body up to the closing quote; no escapes allowed.
  bool plain_string(std::string_view& out) {
    const char* start = p;
    while (p < end && *p != '"') {
      if (*p == '\\') return false;
      ++p;
    }
    if (p == end) return false;
    out = std::string_view(start, static_cast<std::size_t>(p - start));
    ++p;  // closing quote
    return true;
  }
  bool integer(std::int64_t& out) {
    bool neg = false;
    if (p < end && *p == '-') {
      neg = true;
      ++p;
    }
    const char* start = p;
    std::int64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
      v = v * 10 + (*p - '0');
      ++p;
    }
    if (p == start || p - start > 18) return false;
    out = neg ? -v : v;
    return true;
  }
  bool skip_integer() {
    std::int64_t ignored = 0;
    return integer(ignored);
  }
};

}  // namespace

Frame FrameScanner::scan(std::string_view frame) {
  Frame out;
  if (fast(frame, out)) return out;
  return slow(frame);
}

bool FrameScanner::fast(std::string_view frame, Frame& out) {
  Cursor c{frame.data(), frame.data() + frame.size()};
  if (c.literal(event_prefix)) {
    if (!c.plain_string(out.session_id)) return false;
    if (!c.literal(R"(,"event":{"type":")")) return false;
    if (!c.plain_string(out.type)) return false;
    if (!c.literal(R"(,"seq":)")) return false;
    if (!c.integer(out.seq)) return false;
    if (out.type == "assistant/chunk") {
      // ,"time":MS,"data":{"turn":N,"step":N,"chunk":{"type":"CT"
      if (!c.literal(R"(,"time":)") || !c.skip_integer()) return false;
      if (!c.literal(R"(,"data":{"turn":)") || !c.skip_integer()) return false;
      if (!c.literal(R"(,"step":)") || !c.skip_integer()) return false;
      if (!c.literal(R"(,"chunk":{"type":")")) return false;
      if (!c.plain_string(out.chunk_type)) return false;
    }
    // The frame must end like a complete object; a truncated frame is slow-pathed
    // (and then reported invalid).
    if (frame.size() < 4 || frame.substr(frame.size() - 3) != "}}}") return false;
    out.kind = Frame::Kind::event;
    return true;
  }
  if (c.literal(response_prefix)) {
    if (!c.integer(out.id)) return false;
    if (!c.literal(R"(,"result":{"status":")")) return false;
    if (!c.plain_string(out.status)) return false;
    if (frame.back() != '}') return false;
    out.has_id = true;
    out.kind = Frame::Kind::response;
    return true;
  }
  return false;
}

Frame FrameScanner::slow(std::string_view frame) {
  Frame out;
  out.slow = true;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(frame, ec);
  if (ec || !v.is_object()) return out;  // invalid
  const boost::json::object& obj = v.get_object();
  const boost::json::value* id = obj.if_contains("id");
  const boost::json::value* method = obj.if_contains("method");
  if (id != nullptr && method != nullptr) {
    out.kind = Frame::Kind::request;
    return out;
  }
  if (id != nullptr) {
    if (id->is_int64()) {
      out.has_id = true;
      out.id = id->get_int64();
    } else if (id->is_uint64()) {
      out.has_id = true;
      out.id = static_cast<std::int64_t>(id->get_uint64());
    }
    if (const boost::json::value* err = obj.if_contains("error")) {
      out.kind = Frame::Kind::error;
      message_ = boost::json::serialize(*err);
      out.message = message_;
      return out;
    }
    const boost::json::value* result = obj.if_contains("result");
    if (result == nullptr) return out;  // invalid
    out.kind = Frame::Kind::response;
    if (result->is_object()) {
      if (const boost::json::value* s = result->get_object().if_contains("status"); s != nullptr && s->is_string()) {
        status_ = s->get_string();
        out.status = status_;
      }
    }
    return out;
  }
  if (method == nullptr || !method->is_string()) return out;  // invalid
  if (method->get_string() != "session.event") {
    out.kind = Frame::Kind::notification;
    return out;
  }
  const boost::json::value* params = obj.if_contains("params");
  if (params == nullptr || !params->is_object()) return out;
  const boost::json::value* sid = params->get_object().if_contains("sessionId");
  const boost::json::value* event = params->get_object().if_contains("event");
  if (sid == nullptr || !sid->is_string() || event == nullptr || !event->is_object()) return out;
  const boost::json::object& ev = event->get_object();
  const boost::json::value* type = ev.if_contains("type");
  const boost::json::value* seq = ev.if_contains("seq");
  if (type == nullptr || !type->is_string() || seq == nullptr || !seq->is_number()) return out;
  session_id_ = sid->get_string();
  type_ = type->get_string();
  out.session_id = session_id_;
  out.type = type_;
  out.seq = seq->is_int64() ? seq->get_int64() : static_cast<std::int64_t>(seq->to_number<double>());
  if (type_ == "assistant/chunk") {
    const boost::json::value* data = ev.if_contains("data");
    if (data != nullptr && data->is_object()) {
      const boost::json::value* chunk = data->get_object().if_contains("chunk");
      if (chunk != nullptr && chunk->is_object()) {
        const boost::json::value* ct = chunk->get_object().if_contains("type");
        if (ct != nullptr && ct->is_string()) {
          chunk_type_ = ct->get_string();
          out.chunk_type = chunk_type_;
        }
      }
    }
  }
  out.kind = Frame::Kind::event;
  return out;
}

}  // namespace bench
