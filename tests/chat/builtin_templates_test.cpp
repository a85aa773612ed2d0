// The built-in templates write their families' formats: the ones whose models' templates are in
// the oracle render its three conversations exactly as Jinja2 rendered the models' own templates
// (Gemma 2 after llama.cpp's system merge); ChatML and Llama 3 (whose oracle templates add a
// dated system turn) against the format written out here.
#include "chat/builtin_templates.h"

#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "testutil/shared_data.h"

namespace jitllm::chat {
namespace {

using nlohmann::ordered_json;

ChatTemplate builtin(const char* name, const std::string& bos, const std::string& eos) {
  const BuiltinTemplate* t = find_builtin_template(name);
  if (!t) throw std::runtime_error(std::string("no built-in ") + name);
  return ChatTemplate(t->source, bos, eos);
}

TEST(BuiltinTemplates, RenderTheirModelsTemplatesOutputs) {
  const std::pair<const char*, const char*> cases[] = {
      {"qwen", "Qwen-Qwen2.5-7B-Instruct"},
      {"gemma", "google-gemma-2-2b-it"},
      {"phi3", "microsoft-Phi-3.5-mini-instruct"},
      {"mistral", "mistralai-Mistral-Nemo-Instruct-2407"},
  };
  for (const auto& [name, model] : cases)
    for (const char* conversation : {"system_user", "user_assistant_user", "system_user_assistant_user"}) {
      SCOPED_TRACE(std::string(name) + " " + conversation);
      const ordered_json data = ordered_json::parse(testing::read_text(testing::oracle_path(
          std::string("templates/expected/") + model + "." + conversation + ".json")));
      const ChatTemplate t = builtin(name, data["globals"]["bos_token"], data["globals"]["eos_token"]);
      const ordered_json& want =
          data["expected"].is_null() ? data["expected_after_system_merge"] : data["expected"];
      EXPECT_EQ(t.render(data["messages"]), want.get<std::string>());
    }
}

TEST(BuiltinTemplates, ChatMLAndLlama3WriteTheirFormats) {
  const ordered_json messages = {{{"role", "system"}, {"content", "Be brief."}},
                                 {{"role", "user"}, {"content", "Hi "}},
                                 {{"role", "assistant"}, {"content", "Hello."}},
                                 {{"role", "user"}, {"content", "2+2?"}}};
  EXPECT_EQ(builtin("chatml", "", "").render(messages),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi <|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(builtin("llama3", "<|begin_of_text|>", "<|eot_id|>").render(messages),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  ChatRenderOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  EXPECT_EQ(builtin("phi3", "", "<|endoftext|>").render(ordered_json::array({messages[1]}), no_prompt),
            "<|user|>\nHi <|end|>\n<|endoftext|>");
}

TEST(BuiltinTemplates, NamesAreListedAndUnknownOnesAreNot) {
  const std::vector<std::string> names = builtin_template_names();
  EXPECT_EQ(names, (std::vector<std::string>{"chatml", "qwen", "llama3", "gemma", "mistral", "phi3"}));
  for (const std::string& n : names) {
    const BuiltinTemplate* t = find_builtin_template(n);
    ASSERT_NE(t, nullptr);
    EXPECT_NE(std::string(t->end_of_turn), "");
  }
  EXPECT_EQ(find_builtin_template("ChatML"), nullptr);
  EXPECT_EQ(find_builtin_template(""), nullptr);
}

}  // namespace
}  // namespace jitllm::chat
