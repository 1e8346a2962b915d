#include "harnessd/harness/turn_status.hpp"

namespace harnessd::harness {
namespace json = boost::json;

namespace turn_end {
namespace {
json::object of_kind(std::string_view kind) {
  json::object reason;
  reason["kind"] = kind;
  return reason;
}
}  // namespace

json::object completed() { return of_kind("completed"); }

json::object aborted(std::string_view why) {
  json::object reason = of_kind("aborted");
  reason["reason"] = why;
  return reason;
}

json::object max_tokens() { return of_kind("max-tokens"); }

json::object error(std::string_view message, std::string_view code) {
  json::object reason = of_kind("error");
  reason["message"] = message;
  if (!code.empty()) reason["code"] = code;
  return reason;
}

json::object interrupted() { return of_kind("interrupted"); }
}  // namespace turn_end

std::string_view status_for(const json::object& reason, bool max_tokens_as_success) {
  const json::value* kind = reason.if_contains("kind");
  if (kind == nullptr || !kind->is_string()) return "error";
  const json::string& k = kind->get_string();
  if (k == "completed") return "ok";
  if (k == "aborted") return "aborted";
  if (k == "max-tokens") return max_tokens_as_success ? "ok" : "error";
  return "error";  // error, disposed, rejected, interrupted, anything new
}

}  // namespace harnessd::harness
