# jitllm_add_layer(<folder> [SUBDIRS ...] DEPS ...): one static library per layer folder of src/,
# named jitllm_<folder with / replaced by _>, from its *.cpp and those of the listed subfolders
# (model/archs). Sources are globbed so adding a file needs no CMake edit.
function(jitllm_add_layer folder)
  cmake_parse_arguments(L "" "" "DEPS;SUBDIRS" ${ARGN})
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
endfunction()
