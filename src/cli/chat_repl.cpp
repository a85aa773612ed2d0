// The chat REPL (see chat_repl.h).
#include "cli/chat_repl.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/template_choice.h"
#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "chat/content_guard.h"
#include "cli/generation.h"
#include "cli/line_reader.h"
#include "core/error.h"
#include "runtime/engine.h"
#include "sample/sampler_chain.h"
#include "tokenizer/tokenizer.h"

namespace jitllm::cli {
namespace {

using nlohmann::ordered_json;

constexpr const char* kHelp =
    "  /help          this list\n"
    "  /bye           leave (also /exit, /quit, Ctrl-D)\n"
    "  /clear         start the conversation over (the system message stays)\n"
    "  /save FILE     write the conversation as JSON (an array of {role, content})\n"
    "  /load FILE     continue a saved conversation\n"
    "  A line ending in '\\' continues on the next one; Ctrl-C stops an answer or drops the\n"
    "  line being typed (it never leaves the chat: Ctrl-D does).\n"
    "  To send text that begins with '/', begin it with '//'.\n";

// The template, its end-of-turn stop ids, and a note when it is not the model's own.
struct Template {
  chat::ChatTemplate tmpl;
  GenerationStops stops;
  std::string note;
};

Template choose_template(const ChatOptions& options, const Engine& engine, const Tokenizer& tok) {
  const Metadata& md = engine.model().file().metadata;
  auto text_of = [&](int32_t id) {
    return id >= 0 && size_t(id) < tok.n_vocab() ? tok.piece(id) : std::string();
  };
  const std::string bos = text_of(tok.vocab().bos), eos = text_of(tok.vocab().eos);
  std::string name = options.chat_template, note;
  if (name.empty()) {
    if (md.has("tokenizer.chat_template"))
      return {chat::ChatTemplate::from_metadata(md), {}, ""};
    name = "chatml";
    note = "the model has no chat template: using chatml (choose one with --chat-template)";
  }
  const app::TemplateChoice choice = app::choose_chat_template(name);
  Template t{chat::ChatTemplate(choice.source, bos, eos), {}, note};
  // A turn end the vocabulary has as one token stops the answer even when it is not marked
  // end-of-generation.
  // A vocabulary without it as a token has the model write it as text: that stops it too.
  if (!choice.end_of_turn.empty()) {
    if (const int32_t id = tok.vocab().find(choice.end_of_turn); id != kNoToken)
      t.stops.ids.push_back(id);
    t.stops.texts.push_back(choice.end_of_turn);
  }
  return t;
}

ordered_json read_conversation(const std::string& path) {
  // A saved conversation is small: a device or a huge file is not read into memory.
  constexpr uintmax_t kMaxBytes = uintmax_t(64) << 20;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw_error("{}: cannot read (not a file)", path);
  if (std::filesystem::file_size(path, ec) > kMaxBytes)
    throw_error("{}: larger than {} MiB; not a saved conversation", path, kMaxBytes >> 20);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("{}: cannot read", path);
  std::stringstream text;
  text << in.rdbuf();
  ordered_json j = ordered_json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("messages")) j = j["messages"];
  if (!j.is_array()) throw_error("{}: not a JSON array of messages", path);
  for (size_t i = 0; i < j.size(); ++i) {
    const ordered_json& m = j[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
        !m.contains("content") || !m["content"].is_string())
      throw_error("{}: message {} is not {{\"role\": string, \"content\": string}}", path, i);
    const std::string role = m["role"];
    if (role != "system" && role != "user" && role != "assistant")
      throw_error("{}: message {} has role '{}' (system, user or assistant)", path, i, role);
  }
  return j;
}

// Written beside `path` and renamed over it: a failed write leaves an earlier save whole.
void write_conversation(const std::string& path, const ordered_json& messages) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !(out << messages.dump(2) << "\n") || !out.flush()) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw_error("{}: cannot write", path);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw_error("{}: cannot write: {}", path, ec.message());
  }
}

// The first turn after the system message: its user message and what followed it up to the next
// user message. Returns how many messages went (0: nothing left to drop).
size_t drop_oldest_turn(ordered_json& messages) {
  size_t begin = 0;
  while (begin < messages.size() && messages[begin]["role"] == "system") ++begin;
  size_t end = begin + 1;
  while (end < messages.size() && messages[end]["role"] != "user") ++end;
  if (end >= messages.size()) return 0;  // only the newest turn is left
  messages.erase(messages.begin() + ptrdiff_t(begin), messages.begin() + ptrdiff_t(end));
  return end - begin;
}

}  // namespace

int run_chat(const ChatOptions& options, Engine& engine, Session& session, const Tokenizer& tok,
             SamplerChain& sampler) {
  Template t = choose_template(options, engine, tok);
  if (!t.note.empty()) fmt::print(stderr, "[{}]\n", t.note);
  // What the user types is message content: a control token spelled in it stays text.
  const std::vector<std::string> guarded = tok.parse_special_texts();
  ordered_json messages = ordered_json::array();
  auto reset = [&] {
    messages = ordered_json::array();
    if (!options.system.empty()) messages.push_back({{"role", "system"}, {"content", options.system}});
  };
  reset();
  // Room kept for the answer when old turns are dropped to fit the context.
  const int64_t n_ctx = session.n_ctx();
  const int64_t answer_room = std::min<int64_t>(options.n_predict, n_ctx / 4);
  auto render = [&] {
    const chat::GuardedPrompt prompt = chat::render_guarded(t.tmpl, messages, {}, guarded);
    const bool has_bos =
        !t.tmpl.bos_token().empty() && prompt.text.rfind(t.tmpl.bos_token(), 0) == 0;
    return tok.encode_with_literals(prompt.text, /*add_special=*/!has_bos, prompt.literal_spans);
  };

  GenerationStats stats;
  LineReader input(options.history_file);
  fmt::print(stderr, "chat with {} ({} layers, context {} tokens); /help lists the commands\n",
             engine.config().name, engine.config().n_layer, n_ctx);
  while (true) {
    if (!input.interactive()) fmt::print("\n");
    g_interrupt = false;
    const std::optional<std::string> line = input.read("> ");
    if (!line && g_interrupt) {  // Ctrl-C at the prompt: the line is dropped, the chat stays
      std::cin.clear();
      fmt::print("\n");
      continue;
    }
    if (!line) break;  // Ctrl-D: end of input
    std::string text = *line;
    if (text.empty()) continue;
    if (text[0] == '/' && text.rfind("//", 0) != 0) {
      const std::string command = text.substr(0, text.find(' '));
      const size_t arg_at = text.find_first_not_of(' ', command.size());
      const std::string arg = arg_at == std::string::npos ? "" : text.substr(arg_at);
      try {
        if (command == "/bye" || command == "/exit" || command == "/quit") break;
        if (command == "/help") {
          fmt::print(stderr, "{}", kHelp);
        } else if (command == "/clear") {
          reset();
          fmt::print(stderr, "[conversation cleared]\n");
        } else if (command == "/save") {
          if (arg.empty()) throw_error("/save needs a file name");
          write_conversation(arg, messages);
          fmt::print(stderr, "[{} messages saved to {}]\n", messages.size(), arg);
        } else if (command == "/load") {
          if (arg.empty()) throw_error("/load needs a file name");
          ordered_json loaded = read_conversation(arg);
          // The model's template must take it, with the next user turn added as the chat will:
          // one that refuses it (roles out of order) leaves the conversation as it was.
          ordered_json probe = loaded;
          probe.push_back({{"role", "user"}, {"content", "."}});
          try {
            chat::render_guarded(t.tmpl, probe, {}, guarded);
          } catch (const std::exception& e) {
            throw_error("{}: the chat template refuses this conversation ({}); nothing loaded", arg,
                        e.what());
          }
          messages = std::move(loaded);
          if (messages.empty() && !options.system.empty()) reset();
          fmt::print(stderr, "[{} messages loaded from {}]\n", messages.size(), arg);
        } else {
          fmt::print(stderr, "[unknown command {}; /help lists them]\n", command);
        }
      } catch (const Error& e) {
        fmt::print(stderr, "[{}]\n", e.what());
      }
      continue;
    }
    if (text.rfind("//", 0) == 0) text.erase(0, 1);
    messages.push_back({{"role", "user"}, {"content", text}});
    try {
      std::vector<int32_t> ids = render();
      size_t dropped = 0;
      while (int64_t(ids.size()) + answer_room > n_ctx) {
        const size_t n = drop_oldest_turn(messages);
        if (n == 0) break;
        dropped += n;
        ids = render();
      }
      if (dropped)
        fmt::print(stderr, "[the context ({} tokens) was full: dropped the oldest {} messages]\n",
                   n_ctx, dropped);
      if (int64_t(ids.size()) >= n_ctx) {
        fmt::print(stderr, "[this message makes a prompt of {} tokens; the context holds {} (-c): "
                   "not sent]\n", ids.size(), n_ctx);
        messages.erase(messages.end() - 1);
        continue;
      }
      GenerationStops stops = t.stops;
      stops.texts.insert(stops.texts.end(), options.stop_texts.begin(), options.stop_texts.end());
      std::string answer;
      generate(engine, session, tok, sampler, ids, options.n_predict, stats, stops, &answer);
      if (g_interrupt) fmt::print(stderr, "\n[stopped]");
      fmt::print("\n");
      messages.push_back({{"role", "assistant"}, {"content", answer}});
    } catch (const std::exception& e) {
      // A failed turn (the template refuses the conversation, the engine fails) is reported and
      // taken back; the conversation goes on.
      fmt::print(stderr, "\n[{}]\n", e.what());
      messages.erase(messages.end() - 1);
      session.clear();
    }
  }
  stats.print();
  return 0;
}

}  // namespace jitllm::cli
