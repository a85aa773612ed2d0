# ctest driver of the layer check (cmake/check_layers.cmake) on the fixture trees here:
#   cmake -DCASE=clean|stale|violation -DCHECKER=<check_layers.cmake> -P run.cmake
# clean: every include is listed (or the one exception), so it passes. stale: the same tree with
# an exception nothing needs, which fails. violation: a low layer including a higher one, a
# relative include into an unlisted layer and a file in no layer: fails naming each file, line
# and layer.
set(here "${CMAKE_CURRENT_LIST_DIR}")
if(CASE STREQUAL "clean")
  set(tree clean)
  set(rules clean/rules.cmake)
  set(want_rc 0)
  set(want "")
elseif(CASE STREQUAL "stale")
  set(tree clean)
  set(rules clean/rules_stale.cmake)
  set(want_rc 1)
  set(want "exception src/low/a.h including layer mid is no longer needed")
elseif(CASE STREQUAL "violation")
  set(tree violation)
  set(rules violation/rules.cmake)
  set(want_rc 1)
  set(want
    "src/low/a.h:4: includes \"mid/m.h\" of layer mid, which layer low does not list (it may include: none)"
    "src/top/t.cpp:2: includes \"../low/b.h\" of layer low, which layer top does not list (it may include: mid)"
    "src/stray/s.cpp: lies in no layer"
    "layer check: 3 problem(s)")
else()
  message(FATAL_ERROR "run.cmake: -DCASE=clean|stale|violation")
endif()

execute_process(
  COMMAND "${CMAKE_COMMAND}" "-DJITLLM_LAYER_RULES=${here}/${rules}"
          "-DJITLLM_LAYER_SRC=${here}/${tree}/src" -P "${CHECKER}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
# The message is wrapped at no fixed place; compare with the line breaks and indents removed.
string(REGEX REPLACE "\n[ ]*" " " flat "${out}")
if(NOT rc EQUAL want_rc)
  message(FATAL_ERROR "${CASE}: exit status ${rc}, expected ${want_rc}; output:\n${out}")
endif()
foreach(text IN LISTS want)
  string(FIND "${flat}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${CASE}: the output does not say '${text}'; output:\n${out}")
  endif()
endforeach()
message(STATUS "${CASE}: exit status ${rc} as expected")
