// Strict readers for what the daemon sends (results, events, notifications),
// shared by the protocol's value_to conversions. A value of another shape
// throws std::invalid_argument naming the field; a client reports that as
// the daemon's fault (ProtocolError). Params, which the daemon reads from
// clients, have their own readers in messages.cpp: those throw -32602.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace harnessd::protocol::read {

[[noreturn]] inline void fail(std::string_view field, std::string_view problem) {
  throw std::invalid_argument("\"" + std::string(field) + "\" " + std::string(problem));
}

inline const boost::json::object& object(const boost::json::value& value, std::string_view what) {
  if (!value.is_object()) throw std::invalid_argument(std::string(what) + " must be an object");
  return value.get_object();
}

inline const boost::json::value& field(const boost::json::object& obj, std::string_view name) {
  const boost::json::value* value = obj.if_contains(name);
  if (value == nullptr) fail(name, "is missing");
  return *value;
}

/// Absent and null read as absent.
inline const boost::json::value* optional_field(const boost::json::object& obj, std::string_view name) {
  const boost::json::value* value = obj.if_contains(name);
  return value == nullptr || value->is_null() ? nullptr : value;
}

inline std::string string(const boost::json::value& value, std::string_view name) {
  if (!value.is_string()) fail(name, "must be a string");
  return std::string(value.get_string());
}

inline std::string string(const boost::json::object& obj, std::string_view name) {
  return string(field(obj, name), name);
}

inline std::optional<std::string> optional_string(const boost::json::object& obj, std::string_view name) {
  const boost::json::value* value = optional_field(obj, name);
  if (value == nullptr) return std::nullopt;
  return string(*value, name);
}

/// An integer (1.0 is not one) within int64.
inline std::int64_t integer(const boost::json::value& value, std::string_view name) {
  if (value.is_int64()) return value.get_int64();
  if (value.is_uint64() && value.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    return static_cast<std::int64_t>(value.get_uint64());
  }
  fail(name, "must be an integer");
}

inline std::int64_t integer(const boost::json::object& obj, std::string_view name) {
  return integer(field(obj, name), name);
}

inline std::optional<std::int64_t> optional_integer(const boost::json::object& obj, std::string_view name) {
  const boost::json::value* value = optional_field(obj, name);
  if (value == nullptr) return std::nullopt;
  return integer(*value, name);
}

/// A step or index: an integer within 0..INT32_MAX.
inline int small_integer(const boost::json::object& obj, std::string_view name) {
  const std::int64_t value = integer(obj, name);
  if (value < 0 || value > INT32_MAX) fail(name, "is out of range");
  return static_cast<int>(value);
}

inline bool boolean(const boost::json::object& obj, std::string_view name) {
  const boost::json::value& value = field(obj, name);
  if (!value.is_bool()) fail(name, "must be a boolean");
  return value.get_bool();
}

inline const boost::json::array& array(const boost::json::object& obj, std::string_view name) {
  const boost::json::value& value = field(obj, name);
  if (!value.is_array()) fail(name, "must be an array");
  return value.get_array();
}

inline const boost::json::object& object(const boost::json::object& obj, std::string_view name) {
  const boost::json::value& value = field(obj, name);
  if (!value.is_object()) fail(name, "must be an object");
  return value.get_object();
}

}  // namespace harnessd::protocol::read
