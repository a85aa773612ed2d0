// respell_flags (see flag_spelling.h).
#include "core/flag_spelling.h"

#include <algorithm>

namespace jitllm {

FlagSpelling respell_flags(int argc, const char* const* argv,
                           const std::map<std::string, std::string>& short_forms,
                           const std::vector<std::string>& long_names) {
  FlagSpelling out;
  bool literal = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i == 0 || literal || a.size() < 3 || a[0] != '-' || a[1] == '-') {
      if (a == "--") literal = true;
      out.args.push_back(std::move(a));
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(1, eq == std::string::npos ? std::string::npos : eq - 1);
    const std::string value = eq == std::string::npos ? "" : a.substr(eq);
    if (auto it = short_forms.find(name); it != short_forms.end()) {
      out.args.push_back("--" + it->second + value);
    } else if (std::find(long_names.begin(), long_names.end(), name) != long_names.end()) {
      out.warnings.push_back("-" + name + " is deprecated: use --" + name);
      out.args.push_back("--" + name + value);
    } else {
      out.args.push_back(std::move(a));
    }
  }
  return out;
}

}  // namespace jitllm
