// Vocabulary loading from tokenizer.ggml.* metadata (see vocab.h). The defaults, key names and
// fix-ups follow llama.cpp's llama_vocab::load so that ids match it exactly.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/log.h"
#include "tokenizer/algorithms.h"
#include "tokenizer/pretokenizer.h"

namespace jitllm {

const TokenData& Vocab::at(TokenId id) const {
  if (id < 0 || size_t(id) >= tokens.size())
    throw_error("token id {} is out of range (vocabulary has {} tokens)", id, tokens.size());
  return tokens[size_t(id)];
}

bool Vocab::is_eog(TokenId id) const { return std::binary_search(eog.begin(), eog.end(), id); }

int32_t Vocab::merge_rank(std::string_view left, std::string_view right) const {
  thread_local std::string key;  // reused: this runs for every adjacent pair
  key.assign(left).push_back('\xFF');
  key.append(right);
  auto it = merge_ranks.find(key);
  return it == merge_ranks.end() ? -1 : it->second;
}

TokenId Vocab::byte_token(uint8_t byte) const {
  static const char* hex = "0123456789ABCDEF";
  const char name[7] = {'<', '0', 'x', hex[byte >> 4], hex[byte & 15], '>', 0};
  TokenId id = find(name);
  if (id == kNoToken) id = find(std::string(1, char(byte)));
  return id;
}

namespace {

uint32_t attr_from_type(int64_t type) {
  switch (TokenType(type)) {
    case TokenType::Unknown: return kAttrUnknown;
    case TokenType::Unused: return kAttrUnused;
    case TokenType::Normal: return kAttrNormal;
    case TokenType::Control: return kAttrControl;
    case TokenType::UserDefined: return kAttrUserDefined;
    case TokenType::Byte: return kAttrByte;
    default: return kAttrUndefined;
  }
}

// Texts llama.cpp recognises as special roles when no id key names them; finding one forces the
// token to CONTROL (converters often leave them NORMAL).
const std::vector<std::string> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
const std::vector<std::string> kEomTexts = {"<|eom_id|>"};
const std::vector<std::string> kFimPreTexts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>", "\xE2\x96\x81<PRE>",
    "<|code_prefix|>", "<|prefix|>"};
const std::vector<std::string> kFimSufTexts = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>", "\xE2\x96\x81<SUF>",
    "<|code_suffix|>", "<|suffix|>"};
const std::vector<std::string> kFimMidTexts = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>", "\xE2\x96\x81<MID>",
    "<|code_middle|>", "<|middle|>"};
const std::vector<std::string> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"};
const std::vector<std::string> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                               "<REPO>", "<reponame>"};
const std::vector<std::string> kFimSepTexts = {"<|file_sep|>"};
const std::vector<std::string> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};

// Reads an array key through `convert`, adding the key name to a type error.
template <typename F>
auto read_array(const Metadata& md, const std::string& key, F convert) {
  const Value& value = md.at(key);
  try {
    return convert(value);
  } catch (const Error& e) {
    rethrow_with_context(e, key);
  }
}

bool contains(const std::vector<std::string>& list, const std::string& text) {
  return std::find(list.begin(), list.end(), text) != list.end();
}

}  // namespace

Vocab load_vocab(const Metadata& md) {
  Vocab v;
  v.model = md.get_string("tokenizer.ggml.model");
  v.pre = md.get_string_or("tokenizer.ggml.pre", "");

  // Per-model-type defaults (llama.cpp's), before the keys that override them.
  PreTokenizerSpec pre_spec;
  if (v.model == "llama") {
    v.type = VocabType::Spm;
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_space_prefix = true, v.add_bos = true;
  } else if (v.model == "bert") {
    v.type = VocabType::Wpm;
    v.bos = 101, v.unk = 100, v.sep = 102, v.pad = 0, v.mask = 103;
    v.add_bos = true, v.add_sep = true, v.clean_spaces = true;
  } else if (v.model == "gpt2") {
    v.type = VocabType::Bpe;
    v.bos = 11, v.eos = 11;
    pre_spec = pre_tokenizer_spec(v.pre);
    v.clean_spaces = pre_spec.clean_spaces;
    v.ignore_merges = pre_spec.ignore_merges;
    v.add_bos = pre_spec.add_bos;
    if (pre_spec.no_bos) v.bos = kNoToken;
  } else if (v.model == "t5") {
    v.type = VocabType::Ugm;
    v.eos = 1, v.unk = 2, v.pad = 0;
    v.add_eos = true;
    if (md.has("tokenizer.ggml.precompiled_charsmap")) {
      const std::vector<int64_t> bytes = read_array(md, "tokenizer.ggml.precompiled_charsmap",
                                                    [](const Value& x) { return x.as_i64_vector(); });
      for (int64_t b : bytes) v.precompiled_charsmap.push_back(char(uint8_t(b)));
    }
  } else if (v.model == "no_vocab" || v.model == "none") {
    throw_error("tokenizer.ggml.model = '{}': the model has no vocabulary", v.model);
  } else {
    throw_error("tokenizer.ggml.model = '{}' is not supported (llama, gpt2, bert, t5)", v.model);
  }
  if (v.type == VocabType::Bpe) v.escape_whitespaces = false;
  v.add_space_prefix = md.get_bool_or("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  v.remove_extra_whitespaces = md.get_bool_or("tokenizer.ggml.remove_extra_whitespaces", false);

  // Tokens, scores, types.
  const std::vector<std::string> texts = read_array(
      md, "tokenizer.ggml.tokens", [](const Value& v) { return v.as_string_vector(); });
  if (texts.empty()) throw_error("tokenizer.ggml.tokens is empty");
  if (texts.size() > size_t(INT32_MAX)) throw_error("tokenizer.ggml.tokens: too many tokens");
  const size_t n = texts.size();
  std::vector<float> scores;
  if (md.has("tokenizer.ggml.scores")) {
    scores = read_array(md, "tokenizer.ggml.scores",
                        [](const Value& v) { return v.as_f32_vector(); });
    if (scores.size() != n)
      throw_error("tokenizer.ggml.scores has {} entries, tokenizer.ggml.tokens has {}",
                  scores.size(), n);
  }
  std::vector<int64_t> types;
  if (md.has("tokenizer.ggml.token_type")) {
    types = read_array(md, "tokenizer.ggml.token_type",
                       [](const Value& v) { return v.as_i64_vector(); });
    if (types.size() != n)
      throw_error("tokenizer.ggml.token_type has {} entries, tokenizer.ggml.tokens has {}",
                  types.size(), n);
  }
  v.tokens.resize(n);
  v.text_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = v.tokens[i];
    t.text = texts[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : texts[i];
    t.score = scores.empty() ? 0.0f : scores[i];
    t.attr = types.empty() ? kAttrNormal : attr_from_type(types[i]);
    v.text_to_id[t.text] = TokenId(i);
    v.max_token_bytes = std::max(v.max_token_bytes, t.text.size());
  }

  if (v.type == VocabType::Spm) {
    v.spm_words_independent = true;
    for (const TokenData& t : v.tokens)
      if (spm_has_inner_word_start(t.text)) {
        v.spm_words_independent = false;
        break;
      }
  }

  if (v.type == VocabType::Bpe) {
    const std::vector<std::string> merges = read_array(
        md, "tokenizer.ggml.merges", [](const Value& v) { return v.as_string_vector(); });
    v.merge_ranks.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const std::string& m = merges[i];
      const size_t pos = m.find(' ', 1);  // from 1: a merge may start with a space piece
      std::string key;
      if (pos != std::string::npos) key = m.substr(0, pos) + '\xFF' + m.substr(pos + 1);
      else key = "\xFF";  // llama.cpp keeps an unsplittable merge as ("", "")
      v.merge_ranks.emplace(std::move(key), int32_t(i));
    }
  }
  if (v.type == VocabType::Spm) {
    v.linefeed = v.byte_token('\n');
    if (v.linefeed == kNoToken) v.linefeed = v.pad;
  } else if (v.type == VocabType::Wpm) {
    v.linefeed = v.pad;
  }

  // Special ids from keys (out-of-range ids keep the default, as llama.cpp does).
  TokenId fim_pre = kNoToken, fim_suf = kNoToken, fim_mid = kNoToken, fim_pad = kNoToken,
          fim_rep = kNoToken, fim_sep = kNoToken;
  const std::vector<std::pair<const char*, TokenId*>> id_keys = {
      {"bos_token_id", &v.bos},         {"eos_token_id", &v.eos},
      {"eot_token_id", &v.eot},         {"eom_token_id", &v.eom},
      {"unknown_token_id", &v.unk},     {"seperator_token_id", &v.sep},
      {"padding_token_id", &v.pad},     {"mask_token_id", &v.mask},
      {"fim_pre_token_id", &fim_pre},   {"fim_suf_token_id", &fim_suf},
      {"fim_mid_token_id", &fim_mid},   {"fim_pad_token_id", &fim_pad},
      {"fim_rep_token_id", &fim_rep},   {"fim_sep_token_id", &fim_sep},
      {"prefix_token_id", &fim_pre},    {"suffix_token_id", &fim_suf},
      {"middle_token_id", &fim_mid},
  };
  for (const auto& [name, id] : id_keys) {
    const std::string key = std::string("tokenizer.ggml.") + name;
    if (!md.has(key)) continue;
    const int64_t value = md.get_i64(key);
    if (value >= 0 && size_t(value) < n)
      *id = TokenId(value);
    else  // said, since an end token that never comes means output that runs to max_tokens
      log(LogLevel::Warn, "{} is {}, past the {} tokens: ignored", key, value, n);
  }
  v.add_bos = md.get_bool_or("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = md.get_bool_or("tokenizer.ggml.add_eos_token", v.add_eos);
  v.add_sep = md.get_bool_or("tokenizer.ggml.add_sep_token", v.add_sep);
  v.wpm_lowercase = md.get_bool_or("tokenizer.ggml.normalizer.lowercase", true);
  v.wpm_strip_accents =
      md.get_bool_or("tokenizer.ggml.normalizer.strip_accents", v.wpm_lowercase);

  // Roles found by text; the first match (lowest id here) wins, and it becomes CONTROL.
  auto detect = [&](TokenId& role, const std::vector<std::string>& list) {
    if (role != kNoToken) return;
    for (size_t i = 0; i < n; ++i) {
      if (contains(list, v.tokens[i].text)) {
        role = TokenId(i);
        v.tokens[i].attr |= kAttrControl;
        return;
      }
    }
  };
  detect(v.eot, kEotTexts);
  detect(v.eom, kEomTexts);
  detect(fim_pre, kFimPreTexts);
  detect(fim_suf, kFimSufTexts);
  detect(fim_mid, kFimMidTexts);
  detect(fim_pad, kFimPadTexts);
  detect(fim_rep, kFimRepTexts);
  detect(fim_sep, kFimSepTexts);
  for (TokenData& t : v.tokens)
    if ((t.attr & kAttrControl) && t.text.find("unused") != std::string::npos) t.attr |= kAttrUnused;

  // End-of-generation set.
  std::vector<TokenId> eog;
  for (TokenId id : {fim_pad, fim_rep, fim_sep})
    if (id != kNoToken) eog.push_back(id);
  for (size_t i = 0; i < n; ++i) {
    if (contains(kEogTexts, v.tokens[i].text)) {
      eog.push_back(TokenId(i));
      v.tokens[i].attr |= kAttrControl;
    }
  }
  // gpt-oss: these are always rendered (their attributes are replaced, not extended), and kept
  // out of text a request wrote.
  for (TokenData& t : v.tokens)
    if (t.text == "<|channel|>" || t.text == "<|message|>" || t.text == "<|start|>" ||
        t.text == "<|constrain|>")
      t.attr = kAttrUserDefined | kAttrStructural;
  for (TokenId id : {v.eos, v.eot, v.eom})
    if (id != kNoToken) eog.push_back(id);
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  // o200k_harmony / solar-open: "<|end|>" ends a message, not the generation.
  {
    bool has_return = false, has_call = false, has_flush = false;
    TokenId end_id = kNoToken;
    for (TokenId id : eog) {
      const std::string& t = v.tokens[size_t(id)].text;
      if (t == "<|return|>") has_return = true;
      else if (t == "<|call|>" || t == "<|calls|>") has_call = true;
      else if (t == "<|flush|>") has_flush = true;
      else if (t == "<|end|>") end_id = id;
    }
    if (end_id != kNoToken && ((has_return && has_call) || (has_call && has_flush))) {
      eog.erase(std::find(eog.begin(), eog.end(), end_id));
      v.tokens[size_t(end_id)].attr = kAttrUserDefined | kAttrStructural;
    }
  }
  // Gemma 4 / PaddleOCR: with "<|tool_response>" present, "</s>" is a normal token.
  {
    TokenId s_id = kNoToken;
    bool has_tool_response = false;
    for (TokenId id : eog) {
      const std::string& t = v.tokens[size_t(id)].text;
      if (t == "<|tool_response>") has_tool_response = true;
      else if (t == "</s>") s_id = id;
    }
    if (has_tool_response && s_id != kNoToken) {
      eog.erase(std::find(eog.begin(), eog.end(), s_id));
      v.tokens[size_t(s_id)].attr = kAttrNormal;
    }
  }
  v.eog = std::move(eog);

  // Special-token match order: longest text first (ties by id, for determinism).
  for (size_t i = 0; i < n; ++i)
    if (v.tokens[i].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      v.special_match_order.push_back(TokenId(i));
  std::stable_sort(v.special_match_order.begin(), v.special_match_order.end(),
                   [&](TokenId a, TokenId b) {
                     return v.tokens[size_t(a)].text.size() > v.tokens[size_t(b)].text.size();
                   });

  // Per-model whitespace stripping around special tokens (not stored in GGUF; llama.cpp keys it
  // on names).
  std::string name = md.get_string_or("general.name", "");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string arch = md.get_string_or("general.architecture", "");
  auto set_attr = [&](const std::string& text, uint32_t attr, bool on) {
    TokenId id = v.find(text);
    if (id == kNoToken) return;
    if (on) v.tokens[size_t(id)].attr |= attr;
    else v.tokens[size_t(id)].attr &= ~attr;
  };
  const auto has = [](const std::string& s, std::initializer_list<const char*> subs) {
    for (const char* sub : subs)
      if (s.find(sub) != std::string::npos) return true;
    return false;
  };
  if (has(v.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      has(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
    set_attr("<mask>", kAttrLstrip, true);
  } else if (has(name, {"phi-3", "phi3"})) {
    for (TokenId id : v.special_match_order) v.tokens[size_t(id)].attr |= kAttrRstrip;
    set_attr("</s>", kAttrRstrip, true);
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(t, kAttrRstrip, false);
  } else if (has(name, {"modern-bert"})) {
    set_attr("[MASK]", kAttrLstrip, true);
  }
  return v;
}

}  // namespace jitllm
