// Lenient field access for JSON the daemon wrote itself or already
// validated: a missing or mistyped field reads as empty.
#pragma once

#include <boost/json/object.hpp>

#include <string_view>

namespace harnessd::util {

inline std::string_view string_field(const boost::json::object& obj, std::string_view key) {
  const boost::json::value* v = obj.if_contains(key);
  return v != nullptr && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

}  // namespace harnessd::util
