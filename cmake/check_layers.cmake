# Layer include check: cmake -DJITLLM_LAYER_RULES=<rules.cmake> -DJITLLM_LAYER_SRC=<src folder>
#   [-DJITLLM_LAYER_STAMP=<file touched on success>] -P check_layers.cmake
# Fails, naming the file, the line and the layer, when a file under src/<layer>/ includes
# "<other layer>/..." that <layer> does not list. Owns only this check: it reads sources and
# never writes them. The rules come from jitllm_check_layers() (cmake/jitllm_layer.cmake), or by
# hand for the test fixtures (tests/layer_check/); they set
#   JITLLM_LAYERS                     every layer folder, e.g. core backend/cpu server/main cli
#   JITLLM_LAYER_MAY_<folder, / as _> the other layers its files may include
#   JITLLM_LAYER_EXCEPTIONS           <file under src>=<layer>: known includes let through until
#                                     fixed (an exception no file needs any more is an error too)
# Only quoted includes are checked (the project writes its own headers that way); an include
# whose first folders are no layer (a same-folder header, a library) is not a layer's.
cmake_minimum_required(VERSION 3.20)

foreach(v JITLLM_LAYER_RULES JITLLM_LAYER_SRC)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_layers.cmake: -D${v}=... is required")
  endif()
endforeach()
include("${JITLLM_LAYER_RULES}")
get_filename_component(JITLLM_LAYER_SRC "${JITLLM_LAYER_SRC}" ABSOLUTE)
get_filename_component(src_name "${JITLLM_LAYER_SRC}" NAME)

# Longest layer folder first, so src/server/main/x.cpp belongs to server/main, not server.
set(by_length "")
foreach(layer IN LISTS JITLLM_LAYERS)
  string(LENGTH "${layer}" n)
  math(EXPR key "1000 - ${n}")
  list(APPEND by_length "${key}|${layer}")
endforeach()
list(SORT by_length)
list(TRANSFORM by_length REPLACE "^[0-9]+\\|" "")

# The layer a path under src/ lies in ("" when none).
function(layer_of path out)
  foreach(layer IN LISTS by_length)
    string(LENGTH "${layer}/" n)
    string(SUBSTRING "${path}" 0 ${n} head)
    if(head STREQUAL "${layer}/")
      set(${out} "${layer}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

# 1-based line of the first occurrence of `text` in `file`.
function(line_of file text out)
  file(READ "${file}" content)
  string(FIND "${content}" "${text}" pos)
  string(SUBSTRING "${content}" 0 ${pos} before)
  string(REGEX MATCHALL "\n" newlines "${before}")
  list(LENGTH newlines n)
  math(EXPR line "${n} + 1")
  set(${out} ${line} PARENT_SCOPE)
endfunction()

set(include_re "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
file(GLOB_RECURSE files RELATIVE "${JITLLM_LAYER_SRC}"
  "${JITLLM_LAYER_SRC}/*.h" "${JITLLM_LAYER_SRC}/*.hpp" "${JITLLM_LAYER_SRC}/*.inc"
  "${JITLLM_LAYER_SRC}/*.c" "${JITLLM_LAYER_SRC}/*.cc" "${JITLLM_LAYER_SRC}/*.cpp"
  "${JITLLM_LAYER_SRC}/*.cu" "${JITLLM_LAYER_SRC}/*.cuh")
list(SORT files)
set(problems "")
set(used_exceptions "")
foreach(rel IN LISTS files)
  layer_of("${rel}" layer)
  if(layer STREQUAL "")
    list(APPEND problems "${src_name}/${rel}: lies in no layer (declare its folder with jitllm_add_layer or jitllm_layer_rules)")
    continue()
  endif()
  string(REPLACE "/" "_" key "${layer}")
  set(may ${JITLLM_LAYER_MAY_${key}})
  # A line with a ';' comes back as several elements; only the one with the include matters.
  file(STRINGS "${JITLLM_LAYER_SRC}/${rel}" lines REGEX "${include_re}")
  get_filename_component(dir "${rel}" DIRECTORY)
  foreach(line IN LISTS lines)
    string(REGEX MATCH "${include_re}" directive "${line}")
    if(directive STREQUAL "")
      continue()
    endif()
    string(REGEX REPLACE ".*\"([^\"]+)\"$" "\\1" inc "${directive}")
    set(target_path "${inc}")
    if(inc MATCHES "^\\.")
      # "../model/ops.h" from src/backend/cuda/x.h is model/ops.h.
      cmake_path(SET target_path NORMALIZE "${dir}/${inc}")
    endif()
    layer_of("${target_path}" other)
    if(other STREQUAL "" OR other STREQUAL layer OR other IN_LIST may)
      continue()
    endif()
    if("${rel}=${other}" IN_LIST JITLLM_LAYER_EXCEPTIONS)
      list(APPEND used_exceptions "${rel}=${other}")
      continue()
    endif()
    line_of("${JITLLM_LAYER_SRC}/${rel}" "${directive}" n)
    list(JOIN may " " may_text)
    if(may_text STREQUAL "")
      set(may_text "none")
    endif()
    list(APPEND problems "${src_name}/${rel}:${n}: includes \"${inc}\" of layer ${other}, which layer ${layer} does not list (it may include: ${may_text})")
  endforeach()
endforeach()
foreach(e IN LISTS JITLLM_LAYER_EXCEPTIONS)
  if(NOT e IN_LIST used_exceptions)
    string(REPLACE "=" " including layer " what "${e}")
    list(APPEND problems "exception ${src_name}/${what} is no longer needed: remove it from the rules")
  endif()
endforeach()

if(problems)
  list(LENGTH problems count)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "layer check: ${count} problem(s):\n  ${text}\n"
    "Each layer lists the layers it may include (LAYERS in CMakeLists.txt, cmake/jitllm_layer.cmake).")
endif()
if(DEFINED JITLLM_LAYER_STAMP)
  file(TOUCH "${JITLLM_LAYER_STAMP}")
endif()
