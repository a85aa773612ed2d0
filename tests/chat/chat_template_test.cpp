// ChatTemplate's metadata path: the template and the bos/eos texts come from GGUF-style metadata
// (tokenizer.chat_template, tokenizer.ggml.tokens and the bos/eos ids), and the render equals
// the oracle's jinja2 render for the same template; bad metadata is a named error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "io/metadata.h"
#include "testutil/shared_data.h"

namespace jitllm::chat {
namespace {

using ::testing::HasSubstr;
using nlohmann::ordered_json;

ordered_json oracle_case(const std::string& name) {
  return ordered_json::parse(testing::read_text(testing::oracle_path("templates/expected/" + name + ".json")));
}

Metadata llama_metadata(const std::string& template_text) {
  Metadata md;
  md.set("tokenizer.chat_template", jitllm::Value::string(template_text));
  md.set("tokenizer.ggml.tokens", jitllm::Value::string_array({"<unk>", "<|begin_of_text|>", "hello", "<|eot_id|>"}));
  md.set("tokenizer.ggml.bos_token_id", jitllm::Value::u32(1));
  md.set("tokenizer.ggml.eos_token_id", jitllm::Value::u32(3));
  return md;
}

TEST(ChatTemplateMetadata, RendersLikeTheOracleWithTokensFromTheVocabulary) {
  ordered_json c = oracle_case("meta-llama-Llama-3.1-8B-Instruct.system_user_assistant_user");
  std::string source = testing::read_text(testing::oracle_path("templates/" + c["template"].get<std::string>()));
  ChatTemplate t = ChatTemplate::from_metadata(llama_metadata(source));
  EXPECT_EQ(t.bos_token(), c["globals"]["bos_token"].get<std::string>());
  EXPECT_EQ(t.eos_token(), c["globals"]["eos_token"].get<std::string>());
  t.set_clock([] { return std::time_t(1768478400); });  // the oracle's date_string "15 Jan 2026"
  EXPECT_EQ(t.render(c["messages"]), c["expected"].get<std::string>());
}

TEST(ChatTemplateMetadata, NamedTemplatesAndMissingKeys) {
  Metadata md = llama_metadata("{{ bos_token }}default");
  md.set("tokenizer.chat_template.tool_use", jitllm::Value::string("{{ eos_token }}tools"));
  EXPECT_EQ(ChatTemplate::from_metadata(md).render(ordered_json::array()), "<|begin_of_text|>default");
  EXPECT_EQ(ChatTemplate::from_metadata(md, "tool_use").render(ordered_json::array()), "<|eot_id|>tools");
  try {
    ChatTemplate::from_metadata(md, "rag");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer.chat_template.rag"));
  }
  Metadata empty;
  EXPECT_THROW(ChatTemplate::from_metadata(empty), Error);
  // No bos/eos ids: the texts are empty, the template still renders.
  Metadata no_ids;
  no_ids.set("tokenizer.chat_template", jitllm::Value::string("[{{ bos_token }}]"));
  EXPECT_EQ(ChatTemplate::from_metadata(no_ids).render(ordered_json::array()), "[]");
}

TEST(ChatTemplateMetadata, BadTokenIdsAreNamedErrors) {
  Metadata md = llama_metadata("x");
  md.set("tokenizer.ggml.eos_token_id", jitllm::Value::u32(99));
  try {
    ChatTemplate::from_metadata(md);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer.ggml.eos_token_id"));
    EXPECT_THAT(e.what(), HasSubstr("99"));
  }
  md = llama_metadata("{% if %}");
  EXPECT_THROW(ChatTemplate::from_metadata(md), Error);
}

TEST(ChatTemplateRender, OptionsAndMessagesValidation) {
  ChatTemplate t("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"
                 "{% if add_generation_prompt %}>{% endif %}{{ enable_thinking }}{{ tools|length }}",
                 "", "");
  ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(t.render(messages), "user:hi;>True0");
  ChatRenderOptions options;
  options.add_generation_prompt = false;
  options.extra_globals = ordered_json::parse(R"({"enable_thinking": false, "tools": [1, 2]})");
  EXPECT_EQ(t.render(messages, options), "user:hi;False2");
  EXPECT_THROW(t.render(ordered_json::object()), Error);
}

}  // namespace
}  // namespace jitllm::chat
