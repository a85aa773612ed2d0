# Fixture rules: low <- mid <- top <- top/tool, and one exception (mid/legacy.h includes top).
set(JITLLM_LAYERS low mid top top/tool)
set(JITLLM_LAYER_MAY_low "")
set(JITLLM_LAYER_MAY_mid low)
set(JITLLM_LAYER_MAY_top mid low)
set(JITLLM_LAYER_MAY_top_tool top)
set(JITLLM_LAYER_EXCEPTIONS "mid/legacy.h=top")
