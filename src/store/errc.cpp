#include "store/errc.hpp"

#include "harnessd/util/enum_error_category.hpp"

#include <string>

namespace harnessd::store {

namespace {

std::string_view describe(errc value) noexcept {
  switch (value) {
    case errc::corrupt_line:
      return "a line before the last is not a JSON object";
    case errc::foreign_log:
      return "the log belongs to another session id";
    case errc::invalid_log:
      return "the log breaks the log format";
    case errc::unavailable:
      return "the session store is unavailable";
    case errc::lease_lost:
      return "another node holds the session's lease";
  }
  return {};
}

/// A corrupt or foreign log is, to generic code, an invalid argument.
std::error_condition generic_condition(errc value) noexcept {
  switch (value) {
    case errc::corrupt_line:
      return std::errc::illegal_byte_sequence;
    case errc::foreign_log:
    case errc::invalid_log:
      return std::errc::invalid_argument;
    case errc::unavailable:
      return std::errc::io_error;
    case errc::lease_lost:
      return std::errc::operation_not_permitted;
  }
  return {};
}

}  // namespace

const std::error_category& store_category() noexcept {
  static const util::EnumErrorCategory<errc> category("harnessd.store", describe, generic_condition);
  return category;
}

}  // namespace harnessd::store
