// Fuzzes the JSON-RPC decoding of one client frame and the typed params of
// every method: bad input must become an error reply or RpcError, and what
// is accepted must be safe to answer and to write to a session log.
#include "fuzz_check.hpp"

#include "harnessd/rpc/codec.hpp"
#include "harnessd/protocol/messages.hpp"
#include "util/json_limits.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <exception>
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const rpc::Decoded decoded = rpc::decode_frame(harnessd::fuzz::as_view(bytes, size));
  if (const auto* request = std::get_if<rpc::Request>(&decoded)) check_request(*request);
  if (const auto* invalid = std::get_if<rpc::Invalid>(&decoded)) check_error(invalid->error);
  return 0;
}
