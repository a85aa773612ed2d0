// TensorDumper: JITLLM_DUMP-selected intermediate tensors to .f32 files.
#include "model/dump.h"

#include <cstdio>
#include <vector>

#include "core/error.h"
#include "core/tuning.h"

namespace jitllm {

TensorDumper::TensorDumper() {
  const tuning::CoreKnobs& knobs = tuning::core_knobs();
  if (!knobs.dump_dir.text().empty()) dir_ = knobs.dump_dir.text();
  if (!knobs.dump.is_set()) return;
  std::string s = knobs.dump.text(), item;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == ',') {
      if (item == "all")
        all_ = true;
      else if (!item.empty())
        names_.insert(item);
      item.clear();
    } else if (s[i] != ' ') {
      item += s[i];
    }
  }
}

void TensorDumper::operator()(Ops& ops, Act x, const char* name, int il) {
  if (paused_ || (!all_ && !names_.count(name))) return;
  const std::string path =
      dir_ + "/" + name + (il >= 0 ? "." + std::to_string(il) : std::string()) + ".f32";
  std::vector<float> host(size_t(x.rows * x.cols));
  ops.read(x, host.data());
  const bool first = written_.insert(path).second;
  FILE* f = std::fopen(path.c_str(), first ? "wb" : "ab");
  if (!f) throw_error("JITLLM_DUMP: cannot write {}", path);
  const size_t wrote = std::fwrite(host.data(), sizeof(float), host.size(), f);
  std::fclose(f);
  if (wrote != host.size()) throw_error("JITLLM_DUMP: short write to {}", path);
}

}  // namespace jitllm
