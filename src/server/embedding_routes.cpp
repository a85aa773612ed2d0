// POST /v1/embeddings (OpenAI's shape) and POST /v1/rerank (llama-server's and Jina's shape; also
// at /rerank and /v1/reranking), over ServedModel::run_embeddings.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "app/embeddings.h"
#include "server/api_error.h"
#include "server/http_reply.h"
#include "server/http_server.h"
#include "server/request.h"

namespace jitllm::server {

namespace {

using json = nlohmann::json;

void refuse_unknown_fields(const json& body, std::initializer_list<const char*> known) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& key = it.key();
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; }))
      throw invalid_request(key, fmt::format("'{}' is not supported here", key));
  }
}


// A token id list: every element an integer id of the vocabulary.
std::vector<int32_t> id_list(const json& a, int32_t n_vocab, const std::string& where) {
  std::vector<int32_t> ids;
  for (const json& v : a) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= n_vocab)
      throw invalid_request("input", fmt::format("{}: token ids must be integers in [0, {})", where, n_vocab));
    ids.push_back(int32_t(v.get<int64_t>()));
  }
  return ids;
}

// OpenAI's input forms: a string, a list of strings, a list of ids, a list of id lists.
std::vector<std::vector<int32_t>> embedding_inputs(const json& input, ServedModel& m) {
  std::vector<std::vector<int32_t>> out;
  auto text = [&](const json& s, size_t i) {
    if (s.get_ref<const std::string&>().empty())
      throw invalid_request("input", fmt::format("input {} is an empty string", i));
    out.push_back(app::embedding_tokens(m.loaded(), s.get<std::string>()));
  };
  if (input.is_string()) {
    text(input, 0);
  } else if (input.is_array() && !input.empty() && input[0].is_number_integer()) {
    out.push_back(id_list(input, m.n_vocab(), "input"));
  } else if (input.is_array() && !input.empty()) {
    for (size_t i = 0; i < input.size(); ++i) {
      if (input[i].is_string())
        text(input[i], i);
      else if (input[i].is_array() && !input[i].empty())
        out.push_back(id_list(input[i], m.n_vocab(), fmt::format("input {}", i)));
      else
        throw invalid_request("input", fmt::format("input {} must be a non-empty string or list of token ids", i));
    }
  } else {
    throw invalid_request("input", "'input' must be a non-empty string, list of strings, list of "
                                   "token ids or list of token id lists");
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (int64_t(out[i].size()) > m.engine().config().n_ctx_train)
      throw invalid_request("input", fmt::format("input {} has {} tokens, more than the model's "
                                                 "context of {}", i, out[i].size(),
                                                 m.engine().config().n_ctx_train));
  return out;
}

// OpenAI's base64 form: the little-endian float32 bytes, base64-encoded.
std::string base64_floats(const float* v, size_t n) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(n * sizeof(float), '\0');
  std::memcpy(bytes.data(), v, bytes.size());
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t b0 = uint8_t(bytes[i]);
    const uint32_t b1 = i + 1 < bytes.size() ? uint8_t(bytes[i + 1]) : 0;
    const uint32_t b2 = i + 2 < bytes.size() ? uint8_t(bytes[i + 2]) : 0;
    const uint32_t w = b0 << 16 | b1 << 8 | b2;
    out += kAlphabet[w >> 18 & 63];
    out += kAlphabet[w >> 12 & 63];
    out += i + 1 < bytes.size() ? kAlphabet[w >> 6 & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[w & 63] : '=';
  }
  return out;
}

size_t token_count(const std::vector<std::vector<int32_t>>& inputs) {
  size_t n = 0;
  for (const auto& in : inputs) n += in.size();
  return n;
}

}  // namespace

void HttpServer::install_embedding_routes() {
  post_route("/v1/embeddings", [this](const httplib::Request&, const std::string& text,
                                      httplib::Response& res) {
    const json body = parse_json_object_body(text);
    // `user` (OpenAI's abuse-monitoring id) would be accepted and ignored here: refused.
    refuse_unknown_fields(body, {"input", "model", "encoding_format", "dimensions"});
    const auto input = body.find("input");
    if (input == body.end()) throw invalid_request("input", "'input' is required");
    std::string format = "float";
    if (const auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
      if (!f->is_string() || (*f != "float" && *f != "base64"))
        throw invalid_request("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
      format = f->get<std::string>();
    }
    ServedModel& m = model_for(model_field(body));
    const Pooling pooling = app::embedding_pooling(m.engine(), m.pooling());
    const int64_t width = m.engine().embedding_width(pooling);
    // Vectors are not shortened: a model not trained for it (Matryoshka) gives worse ones.
    if (const auto d = body.find("dimensions"); d != body.end() && !d->is_null())
      if (!d->is_number_integer() || d->get<int64_t>() != width)
        throw invalid_request("dimensions", fmt::format("'dimensions' must be the model's {} "
                                                        "(shortened vectors are not supported)", width));
    const std::vector<std::vector<int32_t>> inputs = embedding_inputs(*input, m);
    const std::vector<float> v = m.run_embeddings(inputs, pooling, /*normalize=*/true);
    json data = json::array();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const float* row = v.data() + i * size_t(width);
      json e = {{"object", "embedding"}, {"index", i}};
      if (format == "base64")
        e["embedding"] = base64_floats(row, size_t(width));
      else
        e["embedding"] = std::vector<float>(row, row + width);
      data.push_back(std::move(e));
    }
    const size_t tokens = token_count(inputs);
    metrics_.add_counter("prompt_tokens_total", double(tokens));
    send_json(res, 200, {{"object", "list"}, {"data", data}, {"model", m.id()},
                         {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
  });

  const auto rerank = [this](const httplib::Request&, const std::string& text, httplib::Response& res) {
    const json body = parse_json_object_body(text);
    refuse_unknown_fields(body, {"model", "query", "documents", "top_n", "return_documents"});
    const auto query = body.find("query");
    if (query == body.end() || !query->is_string() || query->get_ref<const std::string&>().empty())
      throw invalid_request("query", "'query' must be a non-empty string");
    const auto docs = body.find("documents");
    if (docs == body.end() || !docs->is_array() || docs->empty())
      throw invalid_request("documents", "'documents' must be a non-empty list of strings");
    size_t top_n = docs->size();
    if (const auto t = body.find("top_n"); t != body.end() && !t->is_null()) {
      if (!t->is_number_integer() || t->get<int64_t>() < 1)
        throw invalid_request("top_n", "'top_n' must be a positive integer");
      top_n = std::min(top_n, size_t(t->get<int64_t>()));
    }
    bool return_documents = false;
    if (const auto r = body.find("return_documents"); r != body.end() && !r->is_null()) {
      if (!r->is_boolean()) throw invalid_request("return_documents", "'return_documents' must be a boolean");
      return_documents = r->get<bool>();
    }
    ServedModel& m = model_for(model_field(body));
    std::vector<std::vector<int32_t>> inputs, types;
    for (size_t i = 0; i < docs->size(); ++i) {
      if (!(*docs)[i].is_string())
        throw invalid_request("documents", fmt::format("document {} is not a string", i));
      app::RerankInput in = app::rerank_input(m.loaded(), query->get<std::string>(), (*docs)[i].get<std::string>());
      inputs.push_back(std::move(in.ids));
      if (!in.types.empty()) types.push_back(std::move(in.types));
      if (int64_t(inputs.back().size()) > m.engine().config().n_ctx_train)
        throw invalid_request("documents", fmt::format("query and document {} make {} tokens, more "
                                                       "than the model's context of {}", i,
                                                       inputs.back().size(), m.engine().config().n_ctx_train));
    }
    const std::vector<float> scores = m.run_embeddings(inputs, Pooling::Rank, false, types);
    const size_t width = size_t(m.engine().embedding_width(Pooling::Rank));
    std::vector<size_t> order(inputs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    // Best first; a NaN score (a broken model) last, so the order stays a strict weak one.
    const auto key = [&](size_t i) {
      const float v = scores[i * width];
      return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
    json results = json::array();
    for (size_t k = 0; k < top_n; ++k) {
      const size_t i = order[k];
      json r = {{"index", i}, {"relevance_score", scores[i * width]}};
      if (return_documents) r["document"] = {{"text", (*docs)[i]}};
      results.push_back(std::move(r));
    }
    const size_t tokens = token_count(inputs);
    metrics_.add_counter("prompt_tokens_total", double(tokens));
    send_json(res, 200, {{"object", "list"}, {"model", m.id()}, {"results", results},
                         {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
  };
  for (const char* path : {"/v1/rerank", "/rerank", "/v1/reranking"}) post_route(path, rerank);
}

}  // namespace jitllm::server
