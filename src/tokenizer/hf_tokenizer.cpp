// HF tokenizer import (see hf_tokenizer.h). Token types use GGUF's numbering (vocab.h TokenType).
#include "tokenizer/hf_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "tokenizer/sentencepiece_proto.h"
#include "tokenizer/vocab.h"

namespace jitllm {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<json> read_json(const fs::path& path) {
  if (!fs::is_regular_file(path)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("{}: cannot open", path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw_error("{}: invalid JSON: {}", path.string(), e.what());
  }
}

// Content of a tokenizer_config.json token entry ("<s>" or {"content": "<s>", ...}).
std::optional<std::string> token_content(const json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string())
    return entry["content"].get<std::string>();
  return std::nullopt;
}

// convert_hf_to_gguf.py's does_token_look_special: added tokens some models forget to mark
// special (<|...|>, <｜...｜>, <unused...>, and a few fixed names).
bool looks_special(const std::string& t) {
  auto starts = [&](const char* p) { return t.rfind(p, 0) == 0; };
  auto ends = [&](const char* p) {
    const std::string s(p);
    return t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" ||
         (starts("<|") && ends("|>")) || (starts("<\xEF\xBD\x9C") && ends("\xEF\xBD\x9C>")) ||
         (starts("<unused") && ends(">"));
}

struct SpecialIds {
  std::map<std::string, int64_t> ids;  // "bos" -> id
  std::map<std::string, bool> add;     // "bos" -> add_bos_token
};

// Special token ids and add_* flags from tokenizer_config.json (by content, through the added
// tokens) and config.json (*_token_id), first source wins, as gguf-py's SpecialVocab.
SpecialIds special_ids(const fs::path& folder, const json* added_tokens, size_t n_vocab,
                       const std::map<std::string, int64_t>& text_to_id) {
  SpecialIds s;
  const auto config = read_json(folder / "tokenizer_config.json");
  static const char* kTypes[] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
  auto set = [&](const std::string& typ, int64_t id) {
    if (id >= 0 && size_t(id) < n_vocab && !s.ids.count(typ)) s.ids[typ] = id;
  };
  if (config) {
    for (const char* typ : kTypes) {
      const std::string t = typ;
      if (auto it = config->find("add_" + t + "_token"); it != config->end() && it->is_boolean())
        s.add[t] = it->get<bool>();
      auto entry = config->find(t + "_token");
      if (entry == config->end()) continue;
      const auto content = token_content(*entry);
      if (!content) continue;
      if (added_tokens) {
        for (const json& tok : *added_tokens)
          if (tok.value("content", "") == *content && tok.contains("id")) {
            set(t, tok["id"].get<int64_t>());
            break;
          }
      } else if (auto id = text_to_id.find(*content); id != text_to_id.end()) {
        set(t, id->second);
      }
    }
  }
  if (const auto cfg = read_json(folder / "config.json")) {
    for (const char* typ : kTypes) {
      const std::string key = std::string(typ) + "_token_id";
      if (auto it = cfg->find(key); it != cfg->end() && it->is_number_integer())
        set(typ, it->get<int64_t>());
    }
  }
  return s;
}

void write_special(Metadata& md, const SpecialIds& s) {
  static const std::map<std::string, std::string> kKeys = {
      {"bos", "bos_token_id"},     {"eos", "eos_token_id"},      {"unk", "unknown_token_id"},
      {"sep", "seperator_token_id"}, {"pad", "padding_token_id"}, {"cls", "cls_token_id"},
      {"mask", "mask_token_id"}};
  for (const auto& [typ, id] : s.ids)
    md.set("tokenizer.ggml." + kKeys.at(typ), Value::u32(uint32_t(id)));
  for (const auto& [typ, add] : s.add)
    if (typ == "bos" || typ == "eos" || typ == "sep")
      md.set("tokenizer.ggml.add_" + typ + "_token", Value::boolean(add));
}

// Known HF split regexes -> llama.cpp pre-tokenizer names (llama.cpp itself identifies them by
// hashing a test tokenization; the regex is what that hash stands for).
std::string pre_name_from_json(const json& tok, const std::string& path) {
  std::vector<std::string> patterns;
  bool byte_level_regex = false;
  std::function<void(const json&)> visit = [&](const json& p) {
    if (!p.is_object()) return;
    const std::string type = p.value("type", "");
    if (type == "Sequence" && p.contains("pretokenizers")) {
      for (const json& q : p["pretokenizers"]) visit(q);
    } else if (type == "Split" && p.contains("pattern")) {
      const json& pat = p["pattern"];
      if (pat.contains("Regex")) patterns.push_back(pat["Regex"].get<std::string>());
      else if (pat.contains("String")) patterns.push_back(pat["String"].get<std::string>());
    } else if (type == "ByteLevel") {
      byte_level_regex = p.value("use_regex", true);
    } else if (type == "Digits") {
      patterns.push_back(p.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+");
    }
  };
  if (tok.contains("pre_tokenizer")) visit(tok["pre_tokenizer"]);
  static const std::string kLlama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
      "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  static const std::string kQwen2 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
      "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  if (patterns.size() == 1 && patterns[0] == kLlama3) return "llama-bpe";
  if (patterns.size() == 1 && patterns[0] == kQwen2) return "qwen2";
  if (patterns.empty() && byte_level_regex) return "gpt-2";
  if (patterns.size() == 1 && patterns[0] == "\\p{N}" && byte_level_regex) return "starcoder";
  throw_error("{}: pre_tokenizer not recognised ({} split patterns{}); convert this model with "
              "llama.cpp's convert_hf_to_gguf.py",
              path, patterns.size(), patterns.empty() ? "" : ", first: " + patterns[0]);
}

// A tokenizer.json model's vocab object (text -> id) into text_to_id; returns the largest id.
int64_t read_vocab_object(const json& model, const std::string& path,
                          std::map<std::string, int64_t>& text_to_id) {
  if (!model.contains("vocab") || !model["vocab"].is_object())
    throw_error("{}: model.vocab is missing", path);
  int64_t max_id = -1;
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (int64_t(1) << 24))
      throw_error("{}: model.vocab['{}'] is not an id in [0, 2^24]", path, text);
    text_to_id[text] = id.get<int64_t>();
    max_id = std::max(max_id, id.get<int64_t>());
  }
  return max_id;
}

Metadata bpe_json_metadata(const fs::path& folder, const json& tok) {
  const std::string path = (folder / "tokenizer.json").string();
  const json& model = tok["model"];
  std::map<std::string, int64_t> text_to_id;
  int64_t max_id = read_vocab_object(model, path, text_to_id);
  const json* added = tok.contains("added_tokens") ? &tok["added_tokens"] : nullptr;
  if (added)
    for (const json& a : *added) max_id = std::max(max_id, a.value("id", int64_t(-1)));
  if (max_id < 0 || max_id > (int64_t(1) << 24)) throw_error("{}: bad vocabulary size", path);
  const size_t n = size_t(max_id + 1);
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n, int32_t(TokenType::Unused));
  for (size_t i = 0; i < n; ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
  for (const auto& [text, id] : text_to_id) {
    tokens[size_t(id)] = text;
    types[size_t(id)] = int32_t(TokenType::Normal);
  }
  if (added) {
    for (const json& a : *added) {
      const int64_t id = a.value("id", int64_t(-1));
      if (id < 0) continue;
      const std::string content = a.value("content", "");
      tokens[size_t(id)] = content;
      const bool special = a.value("special", false) || looks_special(content);
      types[size_t(id)] = int32_t(special ? TokenType::Control : TokenType::UserDefined);
    }
  }
  std::vector<std::string> merges;
  if (model.contains("merges")) {
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2) {
        // Pair form: spaces inside a part are written as U+0120, as gguf-py does.
        auto enc = [](std::string s) {
          std::string out;
          for (char c : s) out += c == ' ' ? std::string("\xC4\xA0") : std::string(1, c);
          return out;
        };
        merges.push_back(enc(m[0].get<std::string>()) + " " + enc(m[1].get<std::string>()));
      } else {
        throw_error("{}: model.merges entry {} has an unknown form", path, merges.size());
      }
    }
  }
  Metadata md;
  md.set("tokenizer.ggml.model", Value::string("gpt2"));
  md.set("tokenizer.ggml.pre", Value::string(pre_name_from_json(tok, path)));
  md.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  md.set("tokenizer.ggml.token_type", Value::i32_array(types));
  md.set("tokenizer.ggml.merges", Value::string_array(merges));
  for (size_t i = 0; i < n; ++i) text_to_id[tokens[i]] = int64_t(i);
  write_special(md, special_ids(folder, added, n, text_to_id));
  return md;
}

// HF WordPiece tokenizer.json (BERT's) -> "bert" metadata as llama.cpp's converter writes it:
// word-initial pieces get the "▁" word mark, "##" continuations lose their prefix, bracketed
// specials stay as they are; [CLS] is the BOS token and [SEP] the separator, both added around
// an input; the normalizer's lowercase and strip_accents flags.
Metadata wordpiece_json_metadata(const fs::path& folder, const json& tok) {
  const std::string path = (folder / "tokenizer.json").string();
  std::map<std::string, int64_t> text_to_id;
  const int64_t max_id = read_vocab_object(tok["model"], path, text_to_id);
  if (max_id < 0) throw_error("{}: model.vocab is empty", path);
  const size_t n = size_t(max_id + 1);
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n, int32_t(TokenType::Unused));
  for (size_t i = 0; i < n; ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
  for (const auto& [text, id] : text_to_id) {
    const bool bracketed = text.size() >= 2 && text.front() == '[' && text.back() == ']';
    tokens[size_t(id)] = bracketed ? text : text.rfind("##", 0) == 0 ? text.substr(2) : "\xE2\x96\x81" + text;
    types[size_t(id)] = int32_t(TokenType::Normal);
  }
  const json* added = tok.contains("added_tokens") ? &tok["added_tokens"] : nullptr;
  if (added)
    for (const json& a : *added) {
      const int64_t id = a.value("id", int64_t(-1));
      if (id >= 0 && size_t(id) < n && a.value("special", false)) types[size_t(id)] = int32_t(TokenType::Control);
    }
  Metadata md;
  md.set("tokenizer.ggml.model", Value::string("bert"));
  md.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  md.set("tokenizer.ggml.token_type", Value::i32_array(types));
  if (tok.contains("normalizer") && !tok["normalizer"].is_null()) {
    const json& norm = tok["normalizer"];
    // Only BERT's normalizer is what the WordPiece tokenizer here applies.
    if (!norm.is_object() || norm.value("type", "") != "BertNormalizer")
      throw_error("{}: normalizer {} is not supported with WordPiece (BertNormalizer only)", path,
                  norm.is_object() ? norm.value("type", "?") : norm.dump());
    const bool lower = norm.value("lowercase", true);
    md.set("tokenizer.ggml.normalizer.lowercase", Value::boolean(lower));
    const auto strip = norm.find("strip_accents");
    md.set("tokenizer.ggml.normalizer.strip_accents",
           Value::boolean(strip != norm.end() && strip->is_boolean() ? strip->get<bool>() : lower));
  }
  auto id_of = [&](const char* text) -> int64_t {
    const auto it = text_to_id.find(text);
    return it == text_to_id.end() ? -1 : it->second;
  };
  SpecialIds special = special_ids(folder, added, n, text_to_id);
  if (!special.ids.count("unk"))  // the model's own unk_token (else the default id would stand)
    if (const int64_t unk = id_of(tok["model"].value("unk_token", "[UNK]").c_str()); unk >= 0)
      special.ids["unk"] = unk;
  // BERT's inputs are [CLS] text [SEP]: the CLS token plays BOS.
  const int64_t cls = special.ids.count("cls") ? special.ids["cls"] : id_of("[CLS]");
  const int64_t sep = special.ids.count("sep") ? special.ids["sep"] : id_of("[SEP]");
  if (cls < 0 || sep < 0) throw_error("{}: a WordPiece vocabulary without [CLS] and [SEP]", path);
  special.ids["bos"] = cls;
  special.ids["sep"] = sep;
  special.ids.erase("cls");
  special.ids.erase("eos");
  special.add["bos"] = true;
  special.add["sep"] = true;
  for (const int64_t id : {cls, sep}) types[size_t(id)] = int32_t(TokenType::Control);
  md.set("tokenizer.ggml.token_type", Value::i32_array(types));
  write_special(md, special);
  return md;
}

std::string base64_decode(const std::string& in, const std::string& what) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+' || c == '-') v = 62;
    else if (c == '/' || c == '_') v = 63;
    else if (c == '=' || c == '\n' || c == '\r') continue;
    else throw_error("{}: invalid base64 character 0x{:02x}", what, uint8_t(c));
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  return out;
}

// HF Unigram tokenizer.json -> "t5" metadata: vocab [[piece, score], ...], unk_id, the
// Precompiled normalizer's charsmap and the Metaspace pre-tokenizer's prefix rule.
Metadata unigram_json_metadata(const fs::path& folder, const json& tok) {
  const std::string path = (folder / "tokenizer.json").string();
  const json& model = tok["model"];
  if (!model.contains("vocab") || !model["vocab"].is_array())
    throw_error("{}: model.vocab of a Unigram model must be an array", path);
  const json& vocab = model["vocab"];
  const size_t n = vocab.size();
  if (n == 0 || n > (size_t(1) << 24)) throw_error("{}: bad vocabulary size {}", path, n);
  std::vector<std::string> tokens(n);
  std::vector<float> scores(n);
  std::vector<int32_t> types(n, int32_t(TokenType::Normal));
  for (size_t i = 0; i < n; ++i) {
    const json& e = vocab[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
      throw_error("{}: model.vocab[{}] is not [piece, score]", path, i);
    tokens[i] = e[0].get<std::string>();
    scores[i] = e[1].get<float>();
  }
  const int64_t unk = model.value("unk_id", int64_t(-1));
  if (unk >= 0 && size_t(unk) < n) types[size_t(unk)] = int32_t(TokenType::Unknown);
  if (tok.contains("added_tokens")) {
    for (const json& a : tok["added_tokens"]) {
      const int64_t id = a.value("id", int64_t(-1));
      if (id < 0 || size_t(id) >= n || id == unk) continue;
      const bool special = a.value("special", false) || looks_special(a.value("content", ""));
      types[size_t(id)] = int32_t(special ? TokenType::Control : TokenType::UserDefined);
    }
  }
  // Normalizer: a Precompiled step (maybe inside a Sequence) carries the charsmap.
  std::string charsmap;
  std::function<void(const json&)> find_charsmap = [&](const json& norm) {
    if (!norm.is_object()) return;
    if (norm.value("type", "") == "Precompiled" && norm.contains("precompiled_charsmap") &&
        norm["precompiled_charsmap"].is_string())
      charsmap = base64_decode(norm["precompiled_charsmap"].get<std::string>(),
                               path + ": normalizer.precompiled_charsmap");
    if (norm.contains("normalizers"))
      for (const json& sub : norm["normalizers"]) find_charsmap(sub);
  };
  if (tok.contains("normalizer")) find_charsmap(tok["normalizer"]);
  // Metaspace: the dummy prefix ("add_prefix_space" or prepend_scheme != "never");
  // WhitespaceSplit (or a " {2,}" -> " " Replace): SentencePiece's remove_extra_whitespaces.
  bool add_prefix = true, merge_spaces = false;
  std::function<void(const json&)> find_replace = [&](const json& norm) {
    if (!norm.is_object()) return;
    if (norm.value("type", "") == "Replace" && norm.contains("pattern") &&
        norm["pattern"].value("Regex", "") == " {2,}")
      merge_spaces = true;
    if (norm.contains("normalizers"))
      for (const json& sub : norm["normalizers"]) find_replace(sub);
  };
  if (tok.contains("normalizer")) find_replace(tok["normalizer"]);
  std::function<void(const json&)> find_metaspace = [&](const json& pre) {
    if (!pre.is_object()) return;
    if (pre.value("type", "") == "WhitespaceSplit") merge_spaces = true;
    if (pre.value("type", "") == "Metaspace") {
      if (pre.contains("add_prefix_space")) add_prefix = pre.value("add_prefix_space", true);
      if (pre.contains("prepend_scheme")) add_prefix = pre.value("prepend_scheme", "always") != "never";
    }
    if (pre.contains("pretokenizers"))
      for (const json& sub : pre["pretokenizers"]) find_metaspace(sub);
  };
  if (tok.contains("pre_tokenizer")) find_metaspace(tok["pre_tokenizer"]);

  Metadata md;
  md.set("tokenizer.ggml.model", Value::string("t5"));
  md.set("tokenizer.ggml.pre", Value::string("default"));
  md.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  md.set("tokenizer.ggml.scores", Value::f32_array(scores));
  md.set("tokenizer.ggml.token_type", Value::i32_array(types));
  md.set("tokenizer.ggml.add_space_prefix", Value::boolean(add_prefix));
  md.set("tokenizer.ggml.remove_extra_whitespaces", Value::boolean(merge_spaces));
  if (!charsmap.empty()) {
    std::vector<Value> bytes;
    bytes.reserve(charsmap.size());
    for (char c : charsmap) bytes.push_back(Value::u8(uint8_t(c)));
    md.set("tokenizer.ggml.precompiled_charsmap", Value::array(ValueType::U8, std::move(bytes)));
  }
  std::map<std::string, int64_t> text_to_id;
  for (size_t i = 0; i < n; ++i) text_to_id.emplace(tokens[i], int64_t(i));
  const json* added = tok.contains("added_tokens") ? &tok["added_tokens"] : nullptr;
  SpecialIds special = special_ids(folder, added, n, text_to_id);
  if (!special.ids.count("unk") && unk >= 0) special.ids["unk"] = unk;
  if (!special.add.count("bos")) special.add["bos"] = false;
  if (!special.add.count("eos")) special.add["eos"] = true;
  write_special(md, special);
  return md;
}

}  // namespace

Metadata sentencepiece_metadata(const std::string& model_path) {
  sentencepiece::SentencePieceProcessor sp;
  const auto status = sp.Load(model_path);
  if (!status.ok()) throw_error("{}: not a SentencePiece model: {}", model_path, status.ToString());
  const fs::path folder = fs::path(model_path).parent_path();
  const int n_sp = sp.GetPieceSize();
  size_t n = size_t(n_sp);
  // config.json's vocab_size wins (the embedding may have more rows than the model has pieces);
  // one outside [1, 2^24) is an error, not ignored (the converter refuses it too).
  if (const auto cfg = read_json(folder / "config.json"))
    if (auto it = cfg->find("vocab_size"); it != cfg->end() && !it->is_null()) {
      const int64_t limit = int64_t(1) << 24;
      const bool ok = it->is_number_unsigned() ? it->get<uint64_t>() - 1 < uint64_t(limit - 1)
                      : it->is_number_integer() ? it->get<int64_t>() > 0 && it->get<int64_t>() < limit
                                                : false;
      if (!ok)
        throw_error("{}: 'vocab_size' is {}, outside the supported range [1, {}]",
                    (folder / "config.json").string(), it->dump(), (1 << 24) - 1);
      n = size_t(it->get<int64_t>());
    }
  std::vector<std::string> tokens(n);
  std::vector<float> scores(n, -10000.0f);
  std::vector<int32_t> types(n, int32_t(TokenType::Unused));
  for (size_t i = 0; i < n; ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
  for (int id = 0; id < n_sp && size_t(id) < n; ++id) {
    tokens[size_t(id)] = sp.IdToPiece(id);
    scores[size_t(id)] = sp.GetScore(id);
    TokenType type = TokenType::Normal;
    if (sp.IsUnknown(id)) type = TokenType::Unknown;
    else if (sp.IsControl(id)) type = TokenType::Control;
    else if (sp.IsUnused(id)) type = TokenType::Unused;
    else if (sp.IsByte(id)) type = TokenType::Byte;
    types[size_t(id)] = int32_t(type);
  }
  // Added tokens declared by the HF tokenizer config.
  if (const auto added = read_json(folder / "added_tokens.json")) {
    for (const auto& [text, id] : added->items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || size_t(id.get<int64_t>()) >= n)
        continue;
      tokens[size_t(id.get<int64_t>())] = text;
      scores[size_t(id.get<int64_t>())] = -1000.0f;
      types[size_t(id.get<int64_t>())] = int32_t(TokenType::UserDefined);
    }
  }
  if (const auto config = read_json(folder / "tokenizer_config.json")) {
    if (auto dec = config->find("added_tokens_decoder"); dec != config->end() && dec->is_object()) {
      for (const auto& [key, data] : dec->items()) {
        int64_t id = -1;
        try {
          id = std::stoll(key);
        } catch (const std::exception&) {
          throw_error("{}/tokenizer_config.json: added_tokens_decoder key '{}' is not an id",
                      folder.string(), key);
        }
        if (id < 0 || size_t(id) >= n || !data.is_object()) continue;
        std::string content = data.value("content", "");
        if (data.value("special", false) || looks_special(content)) {
          types[size_t(id)] = int32_t(TokenType::Control);
        } else {
          // User-defined pieces are matched on raw text, so "▁" goes back to a space.
          std::string raw;
          for (size_t i = 0; i < content.size(); ++i) {
            if (content.compare(i, 3, "\xE2\x96\x81") == 0) raw += ' ', i += 2;
            else raw += content[i];
          }
          content = raw;
          types[size_t(id)] = int32_t(TokenType::UserDefined);
        }
        scores[size_t(id)] = -1000.0f;
        tokens[size_t(id)] = content;
      }
    }
  }
  Metadata md;
  md.set("tokenizer.ggml.model", Value::string("llama"));
  md.set("tokenizer.ggml.pre", Value::string("default"));
  md.set("tokenizer.ggml.tokens", Value::string_array(tokens));
  md.set("tokenizer.ggml.scores", Value::f32_array(scores));
  md.set("tokenizer.ggml.token_type", Value::i32_array(types));
  std::map<std::string, int64_t> text_to_id;
  for (size_t i = 0; i < n; ++i) text_to_id.emplace(tokens[i], int64_t(i));
  SpecialIds special = special_ids(folder, nullptr, n, text_to_id);
  // SentencePiece's own roles when the configs name none.
  if (!special.ids.count("unk") && sp.unk_id() >= 0) special.ids["unk"] = sp.unk_id();
  if (!special.ids.count("bos") && sp.bos_id() >= 0) special.ids["bos"] = sp.bos_id();
  if (!special.ids.count("eos") && sp.eos_id() >= 0) special.ids["eos"] = sp.eos_id();
  if (!special.add.count("bos")) special.add["bos"] = true;  // LlamaTokenizer's default
  write_special(md, special);
  return md;
}

Metadata sentencepiece_t5_metadata(const std::string& model_path) {
  Metadata md = sentencepiece_metadata(model_path);
  std::ifstream in(model_path, std::ios::binary);
  if (!in) throw_error("{}: cannot open", model_path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const SentencePieceSpec spec = read_sentencepiece_spec(bytes, model_path);
  if (spec.model_type != 1)
    throw_error("{}: SentencePiece model type {} is not unigram", model_path, spec.model_type);
  md.set("tokenizer.ggml.model", Value::string("t5"));
  md.set("tokenizer.ggml.add_space_prefix", Value::boolean(spec.add_dummy_prefix));
  md.set("tokenizer.ggml.remove_extra_whitespaces", Value::boolean(spec.remove_extra_whitespaces));
  if (!spec.precompiled_charsmap.empty()) {
    std::vector<Value> charsmap;
    charsmap.reserve(spec.precompiled_charsmap.size());
    for (char c : spec.precompiled_charsmap) charsmap.push_back(Value::u8(uint8_t(c)));
    md.set("tokenizer.ggml.precompiled_charsmap", Value::array(ValueType::U8, std::move(charsmap)));
  }
  // T5 adds EOS, not BOS.
  md.erase("tokenizer.ggml.bos_token_id");
  md.set("tokenizer.ggml.add_bos_token", Value::boolean(false));
  md.set("tokenizer.ggml.add_eos_token", Value::boolean(true));
  return md;
}

Metadata hf_tokenizer_metadata(const std::string& folder_str) {
  const fs::path folder(folder_str);
  if (!fs::is_directory(folder)) throw_error("{}: not a folder", folder_str);
  if (const auto tok = read_json(folder / "tokenizer.json")) {
    const std::string path = (folder / "tokenizer.json").string();
    if (!tok->contains("model") || !(*tok)["model"].is_object())
      throw_error("{}: 'model' is missing", path);
    const std::string type = (*tok)["model"].value("type", "");
    const bool byte_fallback = (*tok)["model"].value("byte_fallback", false);
    if (type == "BPE" && !byte_fallback) return bpe_json_metadata(folder, *tok);
    if (type == "Unigram") return unigram_json_metadata(folder, *tok);
    if (type == "WordPiece") return wordpiece_json_metadata(folder, *tok);
    // SentencePiece-derived tokenizer.json files: use the .model next to them when present.
    if (!fs::is_regular_file(folder / "tokenizer.model"))
      throw_error("{}: model type '{}'{} is not supported without tokenizer.model", path, type,
                  byte_fallback ? " with byte_fallback" : "");
  }
  if (fs::is_regular_file(folder / "tokenizer.model")) {
    const std::string model = (folder / "tokenizer.model").string();
    if (const auto cfg = read_json(folder / "config.json")) {
      const std::string type = cfg->value("model_type", "");
      if (type == "t5" || type == "mt5" || type == "umt5") return sentencepiece_t5_metadata(model);
    }
    return sentencepiece_metadata(model);
  }
  throw_error("{}: no tokenizer.json or tokenizer.model", folder_str);
}

}  // namespace jitllm
