// The build's version: the project version and the commit it was built from ("0.1.0 (commit
// 1a2b3c4d5e6f)", "+changes" when the checkout had uncommitted edits). Generated at build time
// by cmake/version.cmake, so `--version` of both binaries names what they were built from.
#pragma once

namespace jitllm {

const char* version_text();

}  // namespace jitllm
