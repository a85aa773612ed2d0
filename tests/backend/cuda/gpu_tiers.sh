#!/usr/bin/env bash
# The GPU test tiers (gtest filters over test_backend_cuda), sourced by device_run.sh. The whole
# GPU suite no longer fits one device call; `smoke` (about 2 minutes: one test per kernel family
# and the llama.cpp fixtures) runs in every call, the groups each fit a call of their own.
#   tier_filter NAME   prints the filter of tier NAME (smoke, kernels, pick, engine, formats, prefill,
#                      batched, placement, moe)
tier_filter() {
  case $1 in
    smoke) echo 'CudaPick.*:CudaCache.*:Families/CudaFamily.*:CudaMoe.*:GroupedFrom/CudaMoePaths.*:CudaKernels.AttentionPagedRaggedGqa:CudaKernels.MatmulNativeFormatsRealShapes:CudaKernels.FusedNormSwigluRopeStoreEqualUnfused:CudaKernels.ArgmaxRowsEqualsHostArgmax:CudaMmq.Q4KEightBShapes:CudaDqMma.EightBShapes:CudaDecodeFusion.RopeEpilogueEqualsMatvecThenRopeStore:CudaDecodeFusion.DqSwigluEpilogueEqualsDqGateUpThenSwigluQ8:CudaGemm.RealShapes4096:CudaFlashAttention.RaggedSequences:CudaSplitAttention.MatchesReferenceAndSingleCtaKernel:CudaEngine.FusedLaunchesEqualOneKernelPerOp:CudaEngine.GraphReplayEqualsDirectLaunches:Fixtures/CudaFixture.*/Q4_K_M:Fixtures/CudaFixture.*/Q8_0:Fixtures/CudaFixture.*/Q6_K:Fixtures/CudaPrefill.*/Q4_K_M' ;;
    smokelite) tier_filter smoke | sed 's/:Fixtures\/CudaFixture\.\*\/Q8_0:Fixtures\/CudaFixture\.\*\/Q6_K//' ;;  # smoke with only the Q4_K_M fixture (calls that carry more)
    kernels) echo 'CudaKernels.*:CudaMmq.*:CudaDecodeFusion.*' ;;
    pick) echo 'CudaPick.*' ;;  # the logits pick (also in smoke)
    dqmma) echo 'CudaDqMma.*:CudaSplitAttention.*' ;;
    engine) echo 'CudaEngine.*:CudaWarmUp.*:CudaCache.*:CudaPydoc.*' ;;
    formats) echo 'CudaFormats.*:Fixtures/CudaFixture.*:Fixtures/CudaFormatsFixture.*' ;;
    prefill) echo 'CudaGemm.*:CudaFlashAttention.*:Fixtures/CudaPrefill.*' ;;
    batched) echo 'CudaBatched.*' ;;
    moe) echo 'CudaMoe.*:GroupedFrom/CudaMoePaths.*:Families/CudaFamily.*/8:Families/CudaFamily.*/9:Families/CudaFamily.*/10:Families/CudaFamily.*/11' ;;  # the MoE fixtures are CudaFamily 8-11
    placement) echo 'Models/CudaPlacement.*:CudaPlacementCards.*' ;;
    *) echo "gpu_tiers: unknown tier '$1'" >&2; return 1 ;;
  esac
}
