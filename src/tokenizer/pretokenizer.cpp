// Pre-tokenizer regex table and the PCRE2 split (see pretokenizer.h). The regex strings are the
// ones llama.cpp runs for each pre-tokenizer name (HF's tokenizer.json patterns, with `(?i:'s|...)`
// spelled out as `'[sS]|...` so that only ASCII letters fold, as in llama.cpp).
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace jitllm {

namespace {

// Contractions with ASCII-only case folding.
#define JL_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

const char* const kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const char* const kLlama3 = JL_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2 = JL_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Letters as "a letter that is not ASCII lower/upper case": llama.cpp's stand-in for
// \p{Lu}\p{Lt}... classes (it differs from HF for non-ASCII letters; llama.cpp is the reference).
#define JL_UPPERISH "((?=[\\p{L}])([^a-z]))"
#define JL_LOWERISH "((?=[\\p{L}])([^A-Z]))"
const char* const kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?" JL_UPPERISH "*" JL_LOWERISH "+|[^\\r\\n\\p{L}\\p{N}]?" JL_UPPERISH
    "+" JL_LOWERISH "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?" JL_UPPERISH "*" JL_LOWERISH "+" JL_CONTRACTIONS
    "?|[^\\r\\n\\p{L}\\p{N}]?" JL_UPPERISH "+" JL_LOWERISH "*" JL_CONTRACTIONS
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// DeepSeek LLM's letter class: the Latin/Greek/Cyrillic/... ranges of its tokenizer.json.
const char* const kDeepseekLetters =
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293"
    "\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C"
    "\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5"
    "\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77"
    "\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59"
    "\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC"
    "\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107"
    "\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE"
    "\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E"
    "\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F"
    "\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2"
    "\U000118A0-\U000118DF\U0001E900-\U0001E943]+";

struct Entry {
  std::vector<std::string> names;
  PreTokenizerSpec spec;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> e;
    auto add = [&](std::vector<std::string> names, std::vector<std::string> regexes,
                   bool clean_spaces = true, bool ignore_merges = false, bool add_bos = false) {
      Entry entry;
      entry.names = std::move(names);
      entry.spec.regexes = std::move(regexes);
      entry.spec.clean_spaces = clean_spaces;
      entry.spec.ignore_merges = ignore_merges;
      entry.spec.add_bos = add_bos;
      e.push_back(std::move(entry));
    };
    add({"", "default"},
        {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"});
    add({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
         "jina-v5-nano"},
        {kLlama3}, true, true, true);
    add({"minicpm5"},
        {R"(\p{N}{1,3})", JL_CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
        true, true);
    add({"jais-2"},
        {JL_CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})"});
    add({"qwen35"},
        {JL_CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
        false);
    add({"laguna"}, {R"([^\n]+|[\n]+)", kQwen2}, false);
    add({"granite-embed-multi-97m"},
        {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+" JL_CONTRACTIONS
         "?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*" JL_CONTRACTIONS
         "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
        false, true);
    add({"tiny_aya", "cohere2moe"},
        {R"(\d{1,3}(?=(?:\d{3})*\b))",
         "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" JL_CONTRACTIONS
         "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" JL_CONTRACTIONS
         "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
        false);
    add({"dbrx", "smaug-bpe"}, {kLlama3});
    add({"deepseek-llm"},
        {"[\r\n]", kDeepseekLetters,
         "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+", "\\s+$",
         "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}+"},
        false);
    add({"deepseek-coder"},
        {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
         "\\p{N}"},
        false);
    add({"deepseek-v3", "hunyuan-dense", "joyai-llm"},
        {"\\p{N}{1,3}", "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
         "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
         "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
        false);
    add({"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"});
    add({"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"},
        {R"(\p{N})", kGpt2});
    add({"command-r", "smollm"}, {R"(\p{N})", kGpt2}, false);
    add({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
         "mellum", "modern-bert", "exaone4", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt",
         "olmo", "jais"},
        {kGpt2});
    add({"trillion", "granite-docling"}, {kGpt2}, false);
    add({"stablelm2"}, {kQwen2});
    add({"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"}, {kQwen2}, false);
    add({"megrez"}, {kQwen2});
    add({"poro-chat"}, {R"( ?[^(\s|.,!?…。，、।۔،)]+)"}, false);
    add({"bloom", "gpt3-finnish"}, {R"( ?[^(\s|.,!?…。，、।۔،)]+)"});
    add({"glm4", "chatglm-bpe"}, {kLlama3});
    add({"viking"}, {R"( ?[^(\s|.,!?…。，、।۔،)]+)", R"(\p{N})"}, false);
    add({"tekken"}, {kTekken}, false, true, true);
    add({"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o}, false);
    add({"superbpe"}, {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"}, false);
    add({"bailingmoe", "bailingmoe2", "llada-moe"},
        {R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"},
        false);
    add({"seed-coder"},
        {JL_CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"},
        false);
    add({"grok-2"}, {kQwen2}, false);
    for (Entry& entry : e)
      if (entry.names[0] == "glm4") entry.spec.no_bos = true;
    return e;
  }();
  return entries;
}

}  // namespace

PreTokenizerSpec pre_tokenizer_spec(const std::string& pre) {
  for (const Entry& entry : table())
    for (const std::string& name : entry.names)
      if (name == pre) return entry.spec;
  throw_error("tokenizer.ggml.pre = '{}': unknown pre-tokenizer", pre);
}

std::vector<std::string> known_pre_tokenizers() {
  std::vector<std::string> names;
  for (const Entry& entry : table())
    for (const std::string& name : entry.names) names.push_back(name);
  return names;
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) {
  for (const std::string& re : regexes) {
    auto c = std::make_unique<Compiled>();
    int err = 0;
    PCRE2_SIZE err_off = 0;
    // UTF + UCP: \s \d \w and \p{..} use Unicode properties; `$` only at the very end.
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_NO_UTF_CHECK,
                            &err, &err_off, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw_error("pre-tokenizer regex '{}': {} at offset {}", re,
                  reinterpret_cast<const char*>(msg), err_off);
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    compiled_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;

namespace {

// Per-thread JIT stack and match data: PCRE2 objects may not be shared between threads.
struct MatchScratch {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_match_data* data = nullptr;
  MatchScratch() {
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
    data = pcre2_match_data_create(16, nullptr);
  }
  ~MatchScratch() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

}  // namespace

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  thread_local MatchScratch scratch;
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& compiled : compiled_) {
    next.clear();
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t last_end = 0, pos = 0;
      uint32_t options = 0;
      while (pos <= piece.size()) {
        const int rc = pcre2_match(compiled->code, subject, piece.size(), pos,
                                   options | PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
        if (rc == PCRE2_ERROR_NOMATCH) {
          if (options == 0) break;
          // No non-empty match right after an empty one: step one character and search on.
          options = 0;
          if (pos >= piece.size()) break;
          pos += unicode::utf8_seq_len(uint8_t(piece[pos]));
          continue;
        }
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof msg);
          throw_error("pre-tokenizer: regex match failed at byte {}: {}", pos,
                      reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
        const size_t start = ov[0], end = ov[1];
        if (start > last_end) next.push_back(piece.substr(last_end, start - last_end));
        if (end > start) next.push_back(piece.substr(start, end - start));
        last_end = end;
        pos = end;
        // After an empty match, look for a non-empty one at the same place first.
        options = end == start ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
      }
      if (last_end < piece.size()) next.push_back(piece.substr(last_end));
    }
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace jitllm
