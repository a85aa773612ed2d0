// The built-in chat templates (see builtin_templates.h). Contents are rendered as given (Gemma's
// and Llama 3's formats trim them, as their models' own templates do); a system message goes where
// each format puts it: its own turn, or (Gemma, Mistral) into a user turn.
#include "chat/builtin_templates.h"

namespace jitllm::chat {
namespace {

const BuiltinTemplate kTemplates[] = {
    {"chatml",
     "{%- for message in messages -%}"
     "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}",
     "<|im_end|>", "ChatML (OpenHermes, Yi, SmolLM, many fine-tunes)"},
    {"qwen",
     "{%- if messages[0]['role'] != 'system' -%}"
     "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
     "assistant.<|im_end|>\\n' -}}"
     "{%- endif -%}"
     "{%- for message in messages -%}"
     "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}",
     "<|im_end|>", "Qwen2 / Qwen2.5 Instruct"},
    {"llama3",
     "{{- bos_token -}}"
     "{%- for message in messages -%}"
     "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
     "message['content'] | trim + '<|eot_id|>' -}}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}"
     "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}",
     "<|eot_id|>", "Llama 3 / 3.x Instruct"},
    {"gemma",
     "{{- bos_token -}}"
     "{%- set system = messages[0]['content'] if messages[0]['role'] == 'system' else '' -%}"
     "{%- for message in messages if message['role'] != 'system' -%}"
     "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
     "{%- set text = (system + '\\n' + message['content']) if (loop.first and system) else "
     "message['content'] -%}"
     "{{- '<start_of_turn>' + role + '\\n' + text | trim + '<end_of_turn>\\n' -}}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}",
     "<end_of_turn>", "Gemma 1 / 2 / 3 instruction-tuned"},
    {"mistral",
     "{{- bos_token -}}"
     "{%- set system = messages[0]['content'] if messages[0]['role'] == 'system' else '' -%}"
     "{%- set turns = messages | rejectattr('role', 'equalto', 'system') | list -%}"
     "{%- for message in turns -%}"
     "{%- if message['role'] == 'user' -%}"
     "{%- if loop.last and system -%}{{- '[INST]' + system + '\\n\\n' + message['content'] + "
     "'[/INST]' -}}"
     "{%- else -%}{{- '[INST]' + message['content'] + '[/INST]' -}}{%- endif -%}"
     "{%- else -%}{{- message['content'] + eos_token -}}{%- endif -%}"
     "{%- endfor -%}",
     "</s>", "Mistral Nemo / v3 (Tekken) instruct"},
    {"phi3",
     "{%- for message in messages -%}"
     "{{- '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' -}}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- else -%}{{- eos_token -}}"
     "{%- endif -%}",
     "<|end|>", "Phi-3 / Phi-3.5 instruct"},
};

}  // namespace

const BuiltinTemplate* find_builtin_template(std::string_view name) {
  for (const BuiltinTemplate& t : kTemplates)
    if (name == t.name) return &t;
  return nullptr;
}

std::vector<std::string> builtin_template_names() {
  std::vector<std::string> names;
  for (const BuiltinTemplate& t : kTemplates) names.emplace_back(t.name);
  return names;
}

}  // namespace jitllm::chat
