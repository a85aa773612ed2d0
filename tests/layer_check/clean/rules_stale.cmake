# The clean tree's rules plus an exception no file needs.
include(${CMAKE_CURRENT_LIST_DIR}/rules.cmake)
list(APPEND JITLLM_LAYER_EXCEPTIONS "low/a.h=mid")
