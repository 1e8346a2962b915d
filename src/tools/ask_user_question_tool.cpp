// `ask_user_question`: the model asks its user to choose. The questions go
// to the session's clients as question/requested; any of them answers with
// session/answer, and the answers come back to the model as JSON text.
#include "tools/builtin.hpp"

#include <boost/json/array.hpp>

#include <set>

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
  std::string_view guidance() const override {
    return "Ask only when the decision is the user's (a preference, an ambiguous requirement); otherwise decide, and "
           "say what you assumed.";
  }
  bool read_only() const override { return false; }
  bool asks_approval() const override { return false; }  // it asks the user anyway

  asio::awaitable<ToolResult> run(const json::object& args, ToolContext& context) override {
    std::string problem = check_questions(args.at("questions"));
    if (!problem.empty()) co_return ToolResult::failure("INVALID_ARGUMENTS", "ask_user_question: " + problem);
    if (!context.ask_user) {
      co_return ToolResult::failure("NO_ANSWERER", "ask_user_question: nobody can answer here; decide yourself and "
                                                   "say which assumption you made");
    }
    const json::array& questions = args.at("questions").get_array();
    ToolResult result = co_await context.ask_user(questions);
    co_return result;
  }

 private:
  /// What clients need to show the questions and check answers: unique
  /// string ids, a question text, options with unique labels. "" when fine.
  static std::string check_questions(const json::value& questions) {
    if (!questions.is_array() || questions.get_array().empty() || questions.get_array().size() > 16) {
      return "\"questions\" must be an array of 1 to 16 questions";
    }
    std::set<std::string_view> ids;
    for (const json::value& q : questions.get_array()) {
      const json::object* question = q.if_object();
      if (question == nullptr) return "each question must be an object";
      const json::value* id = question->if_contains("id");
      if (id == nullptr || !id->is_string() || id->get_string().empty()) return "each question needs a string \"id\"";
      if (!ids.insert(id->get_string()).second) return "question ids must be unique";
      const json::value* text = question->if_contains("question");
      if (text == nullptr || !text->is_string()) return "each question needs a string \"question\"";
      const json::value* options = question->if_contains("options");
      if (options == nullptr || options->is_null()) continue;
      if (!options->is_array()) return "\"options\" must be an array";
      std::set<std::string_view> labels;
      for (const json::value& o : options->get_array()) {
        const json::value* label = o.is_object() ? o.get_object().if_contains("label") : nullptr;
        if (label == nullptr || !label->is_string()) return "each option needs a string \"label\"";
        if (!labels.insert(label->get_string()).second) return "option labels of a question must be unique";
      }
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<Tool> make_ask_user_question_tool() { return std::make_unique<AskUserQuestionTool>(); }

}  // namespace harnessd::tools
