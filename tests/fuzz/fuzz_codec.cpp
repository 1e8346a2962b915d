// Fuzzes the JSON-RPC decoding of one client frame and the typed params of
// every method: bad input must become an error reply or RpcError, and what
// is accepted must be safe to answer and to write to a session log.
#include "fuzz_check.hpp"

#include "harnessd/rpc/codec.hpp"
#include "harnessd/protocol/messages.hpp"
#include "util/json_limits.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <utility>
#include <variant>

namespace json = boost::json;
namespace rpc = harnessd::rpc;

namespace {

/// Whatever goes back to the client or into a log must read back as JSON.
json::value reparse(const std::string& text) {
  json::error_code ec;
  json::value v = json::parse(text, ec, {}, harnessd::util::log_parse_options());
  FUZZ_CHECK(!ec);
  return v;
}

bool valid_id(const json::value& id) { return id.is_string() || id.is_int64() || id.is_uint64(); }

template <typename Parse>
void try_params(Parse&& parse) {
  try {
    parse();
  } catch (const rpc::RpcError& e) {
    FUZZ_CHECK(e.code() == rpc::ErrorCode::invalid_params);
    FUZZ_CHECK(std::string_view(e.what()).starts_with("params"));
  }
}

void check_request(const rpc::Request& request) {
  FUZZ_CHECK(valid_id(request.id));
  FUZZ_CHECK(reparse(rpc::encode_result(request.id, nullptr)).at("id") == request.id);

  try_params([&] {
    const auto p = boost::json::value_to<harnessd::protocol::InitializeParams>(request.params);
    FUZZ_CHECK(!p.cwd || !p.cwd->empty());
    FUZZ_CHECK(!p.model || !p.model->empty());
    FUZZ_CHECK(!p.max_tokens || *p.max_tokens > 0);
  });
  try_params([&] {
    const auto p = boost::json::value_to<harnessd::protocol::PromptParams>(request.params);
    FUZZ_CHECK(!p.session_id.empty() && p.session_id.size() <= harnessd::protocol::max_session_id_bytes);
    FUZZ_CHECK(!p.content_blocks.empty());
    for (const json::value& block : p.content_blocks) {
      FUZZ_CHECK(block.is_object() && block.get_object().size() == 2);
      FUZZ_CHECK(block.at("type") == "text" && block.at("text").is_string());
    }
    // The blocks become a user/message event in the session log.
    FUZZ_CHECK(reparse(json::serialize(p.content_blocks)) == json::value(p.content_blocks));
  });
  try_params([&] {
    const auto p = boost::json::value_to<harnessd::protocol::CancelParams>(request.params);
    FUZZ_CHECK(!p.session_id.empty() && p.session_id.size() <= harnessd::protocol::max_session_id_bytes);
  });
}

void check_error(const rpc::ErrorResponse& reply) {
  FUZZ_CHECK(reply.id.is_null() || valid_id(reply.id));
  FUZZ_CHECK(!reply.message.empty());
  const json::value v = reparse(rpc::encode_error(reply));
  FUZZ_CHECK(v.at("id") == reply.id);
  FUZZ_CHECK(v.at("error").at("code") == static_cast<int>(reply.code));
}

/// Equal JSON, but for doubles, which Boost.JSON's default parser reads
/// back only to within a few units in the last place.
bool same(const json::value& a, const json::value& b) {
  if (a.is_double() && b.is_double()) {
    const double x = a.get_double();
    const double y = b.get_double();
    return x == y || std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y));
  }
  if (a.is_array() && b.is_array()) {
    const json::array& x = a.get_array();
    const json::array& y = b.get_array();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!same(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.is_object() && b.is_object()) {
    const json::object& x = a.get_object();
    const json::object& y = b.get_object();
    if (x.size() != y.size()) return false;
    for (const auto& [key, value] : x) {
      const json::value* other = y.if_contains(key);
      if (other == nullptr || !same(value, *other)) return false;
    }
    return true;
  }
  return a == b;
}

/// No infinite or NaN double inside (a huge exponent parses to infinity,
/// which no JSON text writes back).
bool finite(const json::value& v) {
  if (v.is_double()) return std::isfinite(v.get_double());
  if (v.is_array()) return std::all_of(v.get_array().begin(), v.get_array().end(), finite);
  if (v.is_object()) {
    return std::all_of(v.get_object().begin(), v.get_object().end(),
                       [](const json::key_value_pair& entry) { return finite(entry.value()); });
  }
  return true;
}

/// A decoded response or notification, encoded again, decodes the same:
/// what a client reads is what the daemon's encoder can write.
template <class Message>
Message redecoded(const std::string& frame) {
  rpc::Decoded again = rpc::decode_frame(frame);
  FUZZ_CHECK(std::holds_alternative<Message>(again));
  return std::get<Message>(std::move(again));
}

void check_answer(const rpc::Decoded& decoded) {
  if (const auto* response = std::get_if<rpc::Response>(&decoded)) {
    if (!finite(response->result)) return;
    const auto again = redecoded<rpc::Response>(rpc::encode_result(response->id, response->result));
    FUZZ_CHECK(again.id == response->id && same(again.result, response->result));
  } else if (const auto* error = std::get_if<rpc::ErrorResponse>(&decoded)) {
    if (!finite(error->data)) return;
    const auto again = redecoded<rpc::ErrorResponse>(rpc::encode_error(*error));
    FUZZ_CHECK(again.id == error->id && again.code == error->code && again.message == error->message &&
               same(again.data, error->data));
  } else if (const auto* note = std::get_if<rpc::Notification>(&decoded)) {
    if (!finite(note->params)) return;
    const auto again = redecoded<rpc::Notification>(rpc::encode_notification(note->method, note->params));
    FUZZ_CHECK(again.method == note->method && same(again.params, note->params));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const rpc::Decoded decoded = rpc::decode_frame(harnessd::fuzz::as_view(bytes, size));
  if (const auto* request = std::get_if<rpc::Request>(&decoded)) check_request(*request);
  if (const auto* invalid = std::get_if<rpc::Invalid>(&decoded)) check_error(invalid->error);
  check_answer(decoded);
  return 0;
}
