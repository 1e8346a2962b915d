// `ask_user_question`: the model asks its user to choose. Answering needs a
// client that can reply to the daemon (session/answer); until the daemon
// has one, the call fails with NO_ANSWERER so the model goes on without.
#include "tools/builtin.hpp"

#include <boost/json/array.hpp>

namespace harnessd::tools {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

class AskUserQuestionTool final : public Tool {
 public:
  std::string_view name() const override { return "ask_user_question"; }
  std::string_view description() const override {
    return "Ask the user one or more multiple-choice questions when a decision is theirs to make (a "
           "preference, an ambiguous requirement). Each question: id, question, optional header, options "
           "(label, description), multi_select. Do not ask what you can find out with the other tools.";
  }
  const json::object& input_schema() const override {
    static const json::object option{
        {"type", "object"},
        {"properties", json::object{{"label", json::object{{"type", "string"}}},
                                    {"description", json::object{{"type", "string"}}}}},
        {"required", json::array{"label"}}};
    static const json::object schema{
        {"type", "object"},
        {"properties",
         json::object{
             {"questions",
              json::object{{"type", "array"},
                           {"items",
                            json::object{{"type", "object"},
                                         {"properties",
                                          json::object{{"id", json::object{{"type", "string"}}},
                                                       {"question", json::object{{"type", "string"}}},
                                                       {"header", json::object{{"type", "string"}}},
                                                       {"options", json::object{{"type", "array"}, {"items", option}}},
                                                       {"multi_select", json::object{{"type", "boolean"}}}}},
                                         {"required", json::array{"id", "question"}}}}}}}},
        {"required", json::array{"questions"}}};
    return schema;
  }
  bool read_only() const override { return false; }

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext&) override {
    const json::value& questions = args.at("questions");
    if (!questions.is_array() || questions.get_array().empty()) {
      co_return ToolResult::failure("INVALID_ARGUMENTS", "ask_user_question: \"questions\" must be a non-empty array");
    }
    co_return ToolResult::failure("NO_ANSWERER",
                                  "ask_user_question: no client can answer questions on this daemon yet; decide "
                                  "yourself and say which assumption you made");
  }
};

}  // namespace

std::unique_ptr<Tool> make_ask_user_question_tool() { return std::make_unique<AskUserQuestionTool>(); }

}  // namespace harnessd::tools
