// Jinja semantics one feature at a time: each snippet in data/snippets.jinja is rendered with the
// context recorded in data/snippets_jinja2.json and compared with python3-jinja2's output (or,
// where jinja2 raised, required to raise a jitllm::Error too).
#include <gtest/gtest.h>

#include "chat/interpreter.h"
#include "chat/parser.h"
#include "testutil/shared_data.h"

namespace jitllm::chat {
namespace {

TEST(ChatSnippets, MatchJinja2) {
  auto data = nlohmann::ordered_json::parse(
      testing::read_text(std::string(JITLLM_SOURCE_DIR) + "/tests/chat/data/snippets_jinja2.json"));
  std::map<std::string, Value> globals;
  for (auto it = data["context"].begin(); it != data["context"].end(); ++it) globals[it.key()] = Value::from_json(it.value());
  globals["raise_exception"] = Value::callable("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
    throw TemplateRaised(a.positional.at(0).str());
  });
  int checked = 0;
  for (const auto& c : data["cases"]) {
    std::string source = c["template"];
    SCOPED_TRACE(source);
    if (c["expected"].is_null()) {
      EXPECT_THROW(
          {
            TemplateAst ast = parse_template(source);
            Interpreter().render(ast, globals);
          },
          Error)
          << "jinja2: " << c["error"];
    } else {
      try {
        TemplateAst ast = parse_template(source);
        EXPECT_EQ(Interpreter().render(ast, globals), c["expected"].get<std::string>());
      } catch (const Error& e) {
        ADD_FAILURE() << "jitllm error: " << e.what();
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 50);
}

}  // namespace
}  // namespace jitllm::chat
