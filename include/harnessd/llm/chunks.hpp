// Builders for the chunk objects of assistant/chunk events (protocol §6), so
// every provider spells them the same way.
#pragma once

#include <boost/json/object.hpp>

#include <string_view>

namespace harnessd::llm::chunks {

boost::json::object block_start(int index, std::string_view block_type);
boost::json::object text_delta(int index, std::string_view text);
boost::json::object reasoning_delta(int index, std::string_view text);
/// `id` and `name` are sent with the first delta of a call only (empty = omitted).
boost::json::object tool_call_delta(int index, std::string_view id, std::string_view name,
                                    std::string_view arguments_delta);
boost::json::object block_end(int index);
boost::json::object usage(boost::json::object usage);
/// `reason`: "stop", "tool-calls", "length" or "error".
boost::json::object finish(std::string_view reason);

}  // namespace harnessd::llm::chunks
