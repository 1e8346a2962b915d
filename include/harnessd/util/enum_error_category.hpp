// One std::error_category for an error enum: its name, and a function that
// describes each value. Each of harnessd's error enums (rpc, client, llm,
// store) is a category of this shape; only their texts differ.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

namespace harnessd::util {

template <class Enum>
class EnumErrorCategory final : public std::error_category {
 public:
  using Describe = std::string_view (*)(Enum) noexcept;
  using Condition = std::error_condition (*)(Enum) noexcept;

  /// `describe` returns "" for a value the enum does not have.
  /// `condition`, if given, maps values to generic conditions (std::errc).
  constexpr EnumErrorCategory(const char* name, Describe describe, Condition condition = nullptr) noexcept
      : name_(name), describe_(describe), condition_(condition) {}

  const char* name() const noexcept override { return name_; }

  std::string message(int value) const override {
    const std::string_view text = describe_(static_cast<Enum>(value));
    if (text.empty()) return std::string("unknown ") + name_ + " error " + std::to_string(value);
    return std::string(text);
  }

  std::error_condition default_error_condition(int value) const noexcept override {
    if (condition_ != nullptr) {
      if (std::error_condition generic = condition_(static_cast<Enum>(value))) return generic;
    }
    return {value, *this};
  }

 private:
  const char* name_;
  Describe describe_;
  Condition condition_;
};

}  // namespace harnessd::util
