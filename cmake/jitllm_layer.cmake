# jitllm_add_layer(<folder> DEPS ...): one static library per layer folder of src/, named
# jitllm_<folder with / replaced by _>. Sources are globbed so adding a file needs no CMake edit.
function(jitllm_add_layer folder)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  string(REPLACE "/" "_" name "${folder}")
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${folder}/*.cpp)
  if(NOT srcs)
    # An empty layer still exists as a target so higher layers can link it.
    set(srcs ${CMAKE_SOURCE_DIR}/cmake/empty.cpp)
  endif()
  add_library(jitllm_${name} STATIC ${srcs})
  target_include_directories(jitllm_${name} PUBLIC ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(jitllm_${name} PUBLIC ${L_DEPS})
endfunction()
