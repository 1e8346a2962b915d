// Each layer's error codes: a std::error_category per layer, values and
// names stable, and what generic code sees of them.
#include "harnessd/client/errors.hpp"
#include "harnessd/rpc/error_code.hpp"
#include "llm/chat.hpp"
#include "llm/errc.hpp"
#include "store/errc.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace harnessd;

TEST_CASE("rpc codes are the wire's codes, in the harnessd.rpc category") {
  const std::error_code busy = rpc::ErrorCode::session_busy;
  CHECK(busy.value() == -32001);
  CHECK(std::string(busy.category().name()) == "harnessd.rpc");
  CHECK(busy.message() == "session already has an active prompt");
  CHECK(rpc::RpcError(rpc::ErrorCode::invalid_params, "params.x").error_code() == rpc::ErrorCode::invalid_params);
  CHECK(busy != std::error_code(-32001, std::generic_category()));
}

TEST_CASE("store codes name the log's fault and map to generic conditions") {
  const std::error_code corrupt = store::errc::corrupt_line;
  CHECK(std::string(corrupt.category().name()) == "harnessd.store");
  CHECK(corrupt == std::errc::illegal_byte_sequence);
  CHECK(std::error_code(store::errc::foreign_log) == std::errc::invalid_argument);
  CHECK(std::error_code(store::errc::invalid_log) == std::errc::invalid_argument);
}

TEST_CASE("llm codes keep the wire codes TurnEndReason carries") {
  CHECK(llm::wire_code(llm::errc::rate_limit) == "RATE_LIMIT");
  CHECK(llm::wire_code(llm::errc::stream_closed) == "STREAM_CLOSED");
  CHECK(llm::wire_code(llm::errc::stream_too_large) == "STREAM_TOO_LARGE");
  const llm::ModelResult limited = llm::error_result("slow down", llm::errc::rate_limit);
  CHECK(limited.finish == llm::FinishReason::error);
  CHECK(limited.error_code == "RATE_LIMIT");
  CHECK(limited.error == llm::errc::rate_limit);
  CHECK(std::string(limited.error.category().name()) == "harnessd.llm");
  const llm::ModelResult missing = llm::error_result("HTTP 404", llm::errc::http_status, "HTTP_404");
  CHECK(missing.error_code == "HTTP_404");
  CHECK(missing.error == llm::errc::http_status);
}

TEST_CASE("client errors carry the daemon's code or a harnessd.client code") {
  const client::RpcError busy(-32001, "session already has an active prompt: s");
  CHECK(busy.error_code() == rpc::ErrorCode::session_busy);
  CHECK(busy.code() == -32001);
  const client::TransportClosed closed("harnessd exited with status 1");
  CHECK(closed.error_code() == client::errc::transport_closed);
  CHECK(std::string(closed.error_code().category().name()) == "harnessd.client");
  CHECK(client::ProtocolError("bad status").error_code() == client::errc::protocol_error);
}
