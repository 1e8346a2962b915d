// The bound on a session id (docs/protocol.md §4): what params accept and
// what the daemon's own child ids are cut to.
#pragma once

#include <cstddef>

namespace harnessd::protocol {

inline constexpr std::size_t max_session_id_bytes = 256;

}  // namespace harnessd::protocol
