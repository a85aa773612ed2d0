// The flag spellings users bring from llama.cpp and from jitllmd's first releases, turned into
// the GNU long flags our CLI11 parsers know, before parsing. CLI11 reads "-ngl" as "-n gl" and
// "-load" as "-l oad"; llama.cpp's multi-letter short forms (-ngl, -np, -ctk...) and jitllmd's
// old single-dash long names (-load, -parallel) are rewritten here instead: the first to their
// long names silently (they are the documented short forms), the second with a deprecation note.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace jitllm {

struct FlagSpelling {
  std::vector<std::string> args;      // argv with the rewrites (args[0] the program)
  std::vector<std::string> warnings;  // one per deprecated spelling met
};

// `short_forms`: multi-letter single-dash flags and the long name each stands for ("ngl" ->
// "n-gpu-layers"). `long_names`: every long name the parser knows ("parallel"); "-parallel" and
// "-parallel=4" become "--parallel" / "--parallel=4". Anything else is left for the parser
// (which reports it). Arguments after "--" are not touched.
FlagSpelling respell_flags(int argc, const char* const* argv,
                           const std::map<std::string, std::string>& short_forms,
                           const std::vector<std::string>& long_names);

}  // namespace jitllm
