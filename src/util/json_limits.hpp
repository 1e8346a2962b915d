// One nesting rule for every JSON parser of the daemon: input from outside
// (client frames, model endpoints) is parsed with input_max_depth, and the
// session log is read back with log_max_depth. An accepted value sits at most
// a few levels deeper inside a logged event, so whatever was accepted live
// can always be loaded again.
#pragma once

#include <boost/json/parse_options.hpp>

#include <cstddef>

namespace harnessd::util {

inline constexpr std::size_t input_max_depth = 32;
inline constexpr std::size_t log_max_depth = 64;

inline boost::json::parse_options input_parse_options() {
  boost::json::parse_options options;
  options.max_depth = input_max_depth;
  return options;
}

inline boost::json::parse_options log_parse_options() {
  boost::json::parse_options options;
  options.max_depth = log_max_depth;
  return options;
}

}  // namespace harnessd::util
