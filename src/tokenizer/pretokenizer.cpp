// Pre-tokenizer regex table and the PCRE2 split (see pretokenizer.h). The regex strings are the
// ones llama.cpp runs for each pre-tokenizer name (HF's tokenizer.json patterns, with `(?i:'s|...)`
// spelled out as `'[sS]|...` so that only ASCII letters fold, as in llama.cpp).
//
// llama.cpp matches a regex in one of three ways, and the split differs on non-ASCII text, so
// each regex is run the same way here (with PCRE2 in place of its code / std::regex):
//  - its hand-written matchers (GPT-2, Llama 3, Qwen 2/3.5, line split): full Unicode
//    properties -> PCRE2 UTF + UCP on the text itself;
//  - regexes with \p{..}: the text is "collapsed" to one byte per codepoint (ASCII kept,
//    non-ASCII whitespace -> \v, other codepoints -> a byte per category L/N/P/M/S, else 0xD0)
//    and \p{X} becomes [<byte>+ASCII members of X] -> PCRE2 in byte mode on that;
//  - other regexes: codepoints with non-ASCII whitespace replaced by \v, ASCII-only \s\d\w
//    -> PCRE2 UTF without UCP.
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

enum class MatchMode { Unicode, Collapsed, Plain };

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  MatchMode mode = MatchMode::Unicode;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

// Byte a non-ASCII codepoint collapses to (llama.cpp's category codes).
constexpr char kCollapsedNumber = char(0xD1), kCollapsedLetter = char(0xD2),
               kCollapsedPunct = char(0xD3), kCollapsedMark = char(0xD4),
               kCollapsedSymbol = char(0xD5), kCollapsedOther = char(0xD0);

struct CategoryClass {
  const char* name;
  char code;
  const char* ascii;  // ASCII members, as a bracket-expression fragment
};
// \p{Lu} etc. collapse to "letter" like \p{L}: llama.cpp keeps one category per codepoint.
const CategoryClass kCategories[] = {
    {"\\p{N}", kCollapsedNumber, "0-9"},
    {"\\p{L}", kCollapsedLetter, "A-Za-z"},
    {"\\p{P}", kCollapsedPunct, "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
    {"\\p{M}", kCollapsedMark, ""},
    {"\\p{S}", kCollapsedSymbol, "\\$\\+<->\\^`\\|"},
    {"\\p{Lu}", kCollapsedLetter, "A-Za-z"}, {"\\p{Ll}", kCollapsedLetter, "A-Za-z"},
    {"\\p{Lt}", kCollapsedLetter, "A-Za-z"}, {"\\p{Lm}", kCollapsedLetter, "A-Za-z"},
    {"\\p{Lo}", kCollapsedLetter, "A-Za-z"},
};

// The regexes llama.cpp runs with its own Unicode-aware code instead of std::regex.
bool has_custom_matcher(const std::string& re) {
  static const std::string qwen35 = JL_CONTRACTIONS
      R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const std::string llama3_original =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return re == kGpt2 || re == kLlama3 || re == llama3_original || re == kQwen2 || re == qwen35 ||
         re == R"([^\n]+|[\n]+)";
}

bool uses_categories(const std::string& re) {
  for (const CategoryClass& c : kCategories)
    if (re.find(c.name) != std::string::npos) return true;
  return false;
}

// llama.cpp's regex rewrite for collapsed text: \p{X} -> [code + ASCII members] (inside a
// bracket expression, without the brackets).
std::string collapse_regex(const std::string& re) {
  std::string out;
  bool inside = false;
  for (size_t i = 0; i < re.size(); ++i) {
    if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) {
      out += '[';
      inside = true;
      continue;
    }
    if (inside && re[i] == ']' && re[i - 1] != '\\') {
      out += ']';
      inside = false;
      continue;
    }
    if (re[i] == '\\' && i + 3 < re.size() && re[i + 1] == 'p' && re[i + 2] == '{') {
      const size_t close = re.find('}', i + 3);
      if (close != std::string::npos && close <= i + 10) {
        const std::string pat = re.substr(i, close - i + 1);
        for (const CategoryClass& c : kCategories) {
          if (pat != c.name) continue;
          if (!inside) out += '[';
          out += c.code;
          out += c.ascii;
          if (!inside) out += ']';
          i = close;
          goto next;
        }
      }
    }
    out += re[i];
  next:;
  }
  return out;
}

}  // namespace

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) {
  for (const std::string& re : regexes) {
    auto c = std::make_unique<Compiled>();
    int err = 0;
    PCRE2_SIZE err_off = 0;
    // `$` only at the very end (ECMAScript), in every mode.
    std::string pattern = re;
    uint32_t options = PCRE2_DOLLAR_ENDONLY;
    if (has_custom_matcher(re)) {
      c->mode = MatchMode::Unicode;
      options |= PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
    } else if (uses_categories(re)) {
      c->mode = MatchMode::Collapsed;
      pattern = collapse_regex(re);  // byte mode: one byte per codepoint
    } else {
      c->mode = MatchMode::Plain;
      options |= PCRE2_UTF | PCRE2_NO_UTF_CHECK;
    }
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
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

// The string PCRE2 sees for `piece` in `mode`, and for each of its byte offsets at a codepoint
// boundary the matching offset in `piece` (`map` is empty when the two are the same).
static void make_proxy(MatchMode mode, std::string_view piece, std::string& proxy,
                std::vector<uint32_t>& map) {
  proxy.clear();
  map.clear();
  if (mode == MatchMode::Unicode) return;
  map.reserve(piece.size() + 1);
  for (size_t offset = 0; offset < piece.size();) {
    const size_t start = offset;
    const uint32_t cpt = unicode::decode_one(piece, offset);
    const size_t proxy_start = proxy.size();
    if (cpt < 0x80) {
      proxy += char(cpt);
    } else {
      const unicode::CodepointFlags f = unicode::flags(cpt);
      if (f.whitespace) {
        proxy += '\v';
      } else if (mode == MatchMode::Plain) {
        proxy.append(piece.substr(start, offset - start));
      } else {
        proxy += f.number ? kCollapsedNumber : f.letter ? kCollapsedLetter
               : f.punctuation ? kCollapsedPunct : f.accent_mark ? kCollapsedMark
               : f.symbol ? kCollapsedSymbol : kCollapsedOther;
      }
    }
    map.resize(proxy.size() + 1, UINT32_MAX);
    map[proxy_start] = uint32_t(start);
  }
  map.resize(proxy.size() + 1, UINT32_MAX);
  map[proxy.size()] = uint32_t(piece.size());
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  thread_local MatchScratch scratch;
  thread_local std::string proxy;
  thread_local std::vector<uint32_t> map;
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& compiled : compiled_) {
    next.clear();
    for (std::string_view piece : pieces) {
      make_proxy(compiled->mode, piece, proxy, map);
      const std::string_view subject_text = compiled->mode == MatchMode::Unicode ? piece : proxy;
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(subject_text.data());
      const auto to_piece = [&](size_t o) { return map.empty() ? o : size_t(map[o]); };
      size_t last_end = 0, pos = 0;
      uint32_t options = 0;
      while (pos <= piece.size()) {
        const int rc = pcre2_match(compiled->code, subject, subject_text.size(), pos,
                                   options | PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
        if (rc == PCRE2_ERROR_NOMATCH) {
          if (options == 0) break;
          // No non-empty match right after an empty one: step one character and search on.
          options = 0;
          if (pos >= subject_text.size()) break;
          pos += compiled->mode == MatchMode::Collapsed
                     ? 1
                     : unicode::utf8_seq_len(uint8_t(subject_text[pos]));
          continue;
        }
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof msg);
          throw_error("pre-tokenizer: regex match failed at byte {}: {}", pos,
                      reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
        pos = ov[1];
        const size_t start = to_piece(ov[0]), end = to_piece(ov[1]);
        if (start > last_end) next.push_back(piece.substr(last_end, start - last_end));
        if (end > start) next.push_back(piece.substr(start, end - start));
        last_end = end;
        // After an empty match, look for a non-empty one at the same place first.
        options = ov[1] == ov[0] ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
      }
      if (last_end < piece.size()) next.push_back(piece.substr(last_end));
    }
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace jitllm
