# Layers of src/ and what each may include.
#
# jitllm_add_layer(<folder> [SUBDIRS ...] DEPS <targets...> [LAYERS <folders...>]): one static
#   library per layer folder of src/, named jitllm_<folder with / replaced by _>, from its *.cpp
#   and those of the listed subfolders (model/archs). Sources are globbed so adding a file needs
#   no CMake edit. LAYERS lists the other layers whose headers files under src/<folder>/ (its
#   subfolders included) may include; a layer may always include its own.
# jitllm_layer_rules(<folder> TARGET <target> [LAYERS <folders...>]): the same rule for a folder
#   that is no library, e.g. src/cli (the jitllm executable) or src/server/main (jitllmd).
# jitllm_layer_exception(<file under src/> <layer> <why>): one known include let through until it
#   is fixed; the check fails once no file needs it any more, so the list cannot go stale.
# jitllm_check_layers(): after every layer and link is declared. At configure time, every LAYERS
#   entry must be linked (directly or through other layers: an include of a layer one does not
#   link would fail at link time); it then adds the build step `jitllm_layer_check`, run before
#   any layer compiles and again whenever a file under src/ changes, which fails the build naming
#   the file, the line and the layer for an include LAYERS does not allow (cmake/check_layers.cmake).
#
# Why explicit LAYERS rather than every layer linked transitively: the front ends link the whole
# engine (cli -> app -> runtime -> backend/cpu, model, graph), yet must not include backend/,
# model/ or graph/ headers: what a layer may include is narrower than what it links.

function(jitllm_add_layer folder)
  cmake_parse_arguments(L "" "" "DEPS;SUBDIRS;LAYERS" ${ARGN})
  string(REPLACE "/" "_" name "${folder}")
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${folder}/*.cpp)
  foreach(sub ${L_SUBDIRS})
    file(GLOB sub_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${folder}/${sub}/*.cpp)
    list(APPEND srcs ${sub_srcs})
  endforeach()
  if(NOT srcs)
    # An empty layer still exists as a target so higher layers can link it.
    set(srcs ${CMAKE_SOURCE_DIR}/cmake/empty.cpp)
  endif()
  add_library(jitllm_${name} STATIC ${srcs})
  target_include_directories(jitllm_${name} PUBLIC ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(jitllm_${name} PUBLIC ${L_DEPS})
  jitllm_layer_rules(${folder} TARGET jitllm_${name} LAYERS ${L_LAYERS})
endfunction()

function(jitllm_layer_rules folder)
  cmake_parse_arguments(L "" "TARGET" "LAYERS" ${ARGN})
  string(REPLACE "/" "_" name "${folder}")
  set_property(GLOBAL APPEND PROPERTY JITLLM_LAYERS ${folder})
  set_property(GLOBAL PROPERTY JITLLM_LAYER_TARGET_${name} ${L_TARGET})
  set_property(GLOBAL PROPERTY JITLLM_LAYER_MAY_${name} ${L_LAYERS})
endfunction()

function(jitllm_layer_exception file layer why)
  set_property(GLOBAL APPEND PROPERTY JITLLM_LAYER_EXCEPTIONS "${file}=${layer}")
endfunction()

# The jitllm_* targets `target` links, directly or through others, into ${out}.
function(_jitllm_link_closure target out)
  set(seen "")
  set(todo ${target})
  while(todo)
    list(POP_FRONT todo t)
    if(NOT TARGET ${t} OR t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(links ${t} LINK_LIBRARIES)
    foreach(l IN LISTS links)
      if(l MATCHES "^jitllm_")
        list(APPEND todo ${l})
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

function(jitllm_check_layers)
  get_property(layers GLOBAL PROPERTY JITLLM_LAYERS)
  get_property(exceptions GLOBAL PROPERTY JITLLM_LAYER_EXCEPTIONS)
  set(rules "# Written by jitllm_check_layers() (cmake/jitllm_layer.cmake); read by check_layers.cmake.\n")
  string(APPEND rules "set(JITLLM_LAYERS ${layers})\n")
  set(targets "")
  foreach(layer IN LISTS layers)
    string(REPLACE "/" "_" name "${layer}")
    get_property(target GLOBAL PROPERTY JITLLM_LAYER_TARGET_${name})
    get_property(may GLOBAL PROPERTY JITLLM_LAYER_MAY_${name})
    _jitllm_link_closure(${target} linked)
    foreach(other IN LISTS may)
      if(NOT other IN_LIST layers)
        message(FATAL_ERROR "layer ${layer}: LAYERS names '${other}', which is no layer")
      endif()
      string(REPLACE "/" "_" other_name "${other}")
      get_property(other_target GLOBAL PROPERTY JITLLM_LAYER_TARGET_${other_name})
      # A layer not built here (backend/cuda without the toolkit) has no links to check, and
      # none can be checked against it; its files are checked all the same.
      if(TARGET ${target} AND TARGET ${other_target} AND NOT other_target IN_LIST linked)
        message(FATAL_ERROR "layer ${layer} may include ${other} (LAYERS) but does not link "
          "${other_target}: add it to DEPS, or drop it from LAYERS")
      endif()
    endforeach()
    string(APPEND rules "set(JITLLM_LAYER_MAY_${name} ${may})\n")
    if(TARGET ${target})
      list(APPEND targets ${target})
    endif()
  endforeach()
  string(APPEND rules "set(JITLLM_LAYER_EXCEPTIONS ${exceptions})\n")
  # Rewritten only when it changes, so a configure alone does not re-run the check.
  set(rules_file ${CMAKE_BINARY_DIR}/jitllm_layer_rules.cmake)
  file(WRITE ${rules_file}.tmp "${rules}")
  configure_file(${rules_file}.tmp ${rules_file} COPYONLY)

  file(GLOB_RECURSE sources CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/src/*.h ${CMAKE_SOURCE_DIR}/src/*.hpp ${CMAKE_SOURCE_DIR}/src/*.inc
    ${CMAKE_SOURCE_DIR}/src/*.c ${CMAKE_SOURCE_DIR}/src/*.cc ${CMAKE_SOURCE_DIR}/src/*.cpp
    ${CMAKE_SOURCE_DIR}/src/*.cu ${CMAKE_SOURCE_DIR}/src/*.cuh)
  set(stamp ${CMAKE_BINARY_DIR}/jitllm_layer_check.stamp)
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DJITLLM_LAYER_RULES=${rules_file}
            -DJITLLM_LAYER_SRC=${CMAKE_SOURCE_DIR}/src -DJITLLM_LAYER_STAMP=${stamp}
            -P ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake
    DEPENDS ${sources} ${rules_file} ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake
    COMMENT "Checking the includes of every layer (cmake/check_layers.cmake)"
    VERBATIM)
  add_custom_target(jitllm_layer_check ALL DEPENDS ${stamp})
  foreach(target IN LISTS targets)
    add_dependencies(${target} jitllm_layer_check)
  endforeach()
endfunction()
