// Temporary files for writers that publish a whole file or nothing: the data goes to a file
// beside the destination under a name no other writer can have (mkstemp), and a rename puts it
// in place. Two writers of one destination (two `jitllm convert`s, two servers filling one
// cache) then each publish a complete file and the last rename wins; none writes into another's.
#pragma once

#include <string>

namespace jitllm {

// Creates "<dest>.tmp.XXXXXX" (unique, mode 0644) in dest's folder and returns its descriptor,
// open for reading and writing; `tmp_path` receives the name. Throws naming the path.
int create_temp_beside(const std::string& dest, std::string& tmp_path);

}  // namespace jitllm
