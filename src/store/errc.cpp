#include "store/errc.hpp"

#include <string>

namespace harnessd::store {

namespace {

class StoreCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "harnessd.store"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
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
    return "unknown store error " + std::to_string(value);
  }
  /// A corrupt or foreign log is, to generic code, an invalid argument.
  std::error_condition default_error_condition(int value) const noexcept override {
    switch (static_cast<errc>(value)) {
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
    return {value, *this};
  }
};

}  // namespace

const std::error_category& store_category() noexcept {
  static const StoreCategory category;
  return category;
}

}  // namespace harnessd::store
