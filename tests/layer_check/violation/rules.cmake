# Fixture rules: low <- mid <- top; top may not include low directly.
set(JITLLM_LAYERS low mid top)
set(JITLLM_LAYER_MAY_low "")
set(JITLLM_LAYER_MAY_mid low)
set(JITLLM_LAYER_MAY_top mid)
