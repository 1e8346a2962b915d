#include "harness/system_prompt.hpp"

namespace harnessd::harness {

namespace {

constexpr std::string_view identity =
    "You are a coding agent served by harnessd. You act in the user's workspace only through the tools you are "
    "offered; every call and its result are logged, and calls that may change something can wait for the "
    "user's approval.";

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

std::string expand_persona(std::string_view persona, std::string_view model, std::string_view cwd) {
  std::string text(persona);
  replace_all(text, "{{model}}", model);
  replace_all(text, "{{cwd}}", cwd);
  return text;
}

std::string build_system_prompt(std::string_view persona, std::string_view model, std::string_view cwd,
                                const std::vector<llm::ToolSpec>& tools) {
  std::string prompt(identity);
  const std::string expanded = expand_persona(persona, model, cwd);
  if (!expanded.empty()) prompt += "\n\n" + expanded;
  bool heading = false;
  for (const llm::ToolSpec& tool : tools) {
    if (tool.guidance.empty()) continue;
    if (!heading) prompt += "\n\n# Tools";
    heading = true;
    prompt += "\n\n## " + tool.name + "\n" + tool.guidance;
  }
  return prompt;
}

}  // namespace harnessd::harness
