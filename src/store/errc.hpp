// Why a session log cannot be used, as a std::error_code enum of the
// "harnessd.store" category. The store throws std::system_error with these
// (and with the system's codes for I/O failures).
#pragma once

#include <system_error>

namespace harnessd::store {

enum class errc {
  corrupt_line = 1,    ///< a line that is not a JSON object, before the last line
  foreign_log,         ///< the log's header names another session id
  invalid_log,         ///< intact JSON that breaks the log's rules (seq, turn, depth)
  unavailable,         ///< the database cannot be reached or failed the write
  lease_lost,          ///< another node took the session over: writes are refused
};

const std::error_category& store_category() noexcept;

inline std::error_code make_error_code(errc code) noexcept { return {static_cast<int>(code), store_category()}; }

}  // namespace harnessd::store

template <>
struct std::is_error_code_enum<harnessd::store::errc> : std::true_type {};
