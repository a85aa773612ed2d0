#!/usr/bin/env bash
# One call on the GPU machine (device tool): GPU tests, the process-level cubin-cache check and
# decode/prefill speed on synthetic Llama-3.2-1B and 3.1-8B Q4_K_M. Expects the carry folder made
# by tests/backend/cuda/make_carry.sh at build/cuda-carry (binaries + the oracle subset).
# Usage: bash tests/backend/cuda/device_run.sh [stage...]   stages: tests cache speed (default all),
# tier:NAME (a GPU test tier of gpu_tiers.sh; tier:smoke in every call), samelogits (this build's
# logits on the card against a carried earlier build's, bit for bit), qwen3 (the qwen3 family on
# the card against transformers),
# prefill (GEMM/flash tests + timings), speedab (pp512 with the prefill GEMM / flash attention off
# and on), gputests (test_backend_cuda alone), speedq8 (8B Q8_0 speed),
# bench (matvec shapes), profile (per-kernel decode time), decodeab (tg128 per DECODE_ENVS
# variant), batched (N sessions decoding together: SESSIONS=1,8,32,64), placement (gpuplace:
# partial offload and two cards), serve (jitllmd under bench/serve/load.py against jitllm batched),
# moe (an MoE shape's speed beside llama.cpp's, single runs), moeab (the MoE expert paths),
# peerserve (llama-server under the same client, after serve), coldstart (jitllmd's time to ready on
# a fresh cubin cache, this build against BASE_SERVE_BIN's), constrained (issue 24: free vs constrained serving, arms interleaved), schemas (the structured-
# output and tool-call checks of tests/server_it against jitllmd on the card)
set -u -o pipefail
C=${C:-build/cuda-carry}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/bin /tmp/lib
for f in $C/bin/*.xz; do xz -dc "$f" > /tmp/bin/$(basename "$f" .xz); chmod +x /tmp/bin/$(basename "$f" .xz); done
for f in $C/lib/*.xz; do xz -dc "$f" > /tmp/lib/$(basename "$f" .xz); done
export LD_LIBRARY_PATH=/tmp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export JITLLM_SHARED=$PWD/$C/shared
export JITLLM_SOURCE_DIR=$PWD  # the tree the tests read tests/model/data from
export XDG_CACHE_HOME=/tmp/xdg
stages=${*:-tests cache speed}
# The peer (llama.cpp) is built outside the repo: a carried, ignored .peer/build.sh (if present)
# builds it into $LLAMA_BIN in the background; the repo keeps no recipe for it.
LB=${LLAMA_BIN:-/tmp/llama/b/bin}
peer_build_start() {
  if [ -f /tmp/llama-started ]; then return; fi
  touch /tmp/llama-started
  if [ -x .peer/build.sh ]; then (bash .peer/build.sh > $OUT/llama_build.log 2>&1; touch /tmp/llama-done) &
  else touch /tmp/llama-done; fi
}
peer_build_wait() {
  while [ ! -f /tmp/llama-done ]; do sleep 2; done
  ls $LB/llama-bench $LB/llama-batched-bench || tail -n 20 $OUT/llama_build.log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee $OUT/gpu.txt
ldd /tmp/bin/jitllm /tmp/bin/test_backend_cuda | grep -E "not found|fmt|pcre|icu|sentencepiece|httplib" | tee -a $OUT/gpu.txt
# wait_ready PORT SECONDS: polls http://127.0.0.1:PORT/health until it answers 200 (else fails
# after SECONDS); seconds_since T0: the seconds since `date +%s.%N` gave T0.
wait_ready() {
  python3 - "$1" "$2" <<'PY'
import sys, time, urllib.request
end = time.time() + float(sys.argv[2])
while time.time() < end:
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2).status == 200:
            sys.exit(0)
    except Exception:
        time.sleep(0.25)
sys.exit(1)
PY
}
seconds_since() { python3 -c "import time; print(round(time.time() - $1, 1))"; }
. "$(dirname "$0")/gpu_tiers.sh"
# The peer build takes minutes: a call that serves it starts it before the tests run.
case " $stages " in *" peerserve "*) peer_build_start ;; esac
for s in $stages; do
  case $s in
    tier:*)  # one GPU test tier (gpu_tiers.sh: smoke runs in every call)
      t=${s#tier:}
      timeout ${TIER_S:-200} /tmp/bin/test_backend_cuda --gtest_filter="$(tier_filter $t)" 2>&1 | tee $OUT/tier_$t.log |
        grep -E "^\[ cuda|FAILED|PASSED|Failure|Expected|Which is|actual|rel err" | head -n 120
      ;;
    qwen3)  # the qwen3 family on the card against transformers' logits (tests/model/data/qwen3-tiny)
      Q=/tmp/qwen3-tiny && mkdir -p $Q && cp tests/model/data/qwen3-tiny/{config.json,model.safetensors} $Q/ &&
        cp $C/shared/oracle/pydoc-llama/hf/tokenizer.model $C/shared/oracle/pydoc-llama/hf/tokenizer_config.json $Q/
      for i in 0 1; do
        ids=$(python3 -c "import json; print(' '.join(map(str, json.load(open('tests/model/data/qwen3-tiny/reference.json'))['prompts'][$i]['ids'])))")
        for ch in 256 5; do
          /tmp/bin/jitllm eval -m $Q --ids "$ids" -b $ch --devices cuda --logits /tmp/q3.$i.$ch.f32 > /dev/null 2>> $OUT/qwen3.log
          python3 -c "import numpy as n; a=n.fromfile('/tmp/q3.$i.$ch.f32','f4'); b=n.fromfile('tests/model/data/qwen3-tiny/logits.$i.f32','f4'); print('qwen3 cuda prompt $i chunk $ch: max |diff| %.4g of %.3g, argmax equal %s' % (abs(a-b).max(), abs(b).max(), (a.reshape(-1,2048).argmax(1)==b.reshape(-1,2048).argmax(1)).all()))" | tee -a $OUT/qwen3.log
        done
      done
      ;;
    samelogits)  # the logits of /tmp/bin/jitllm and of a carried earlier build ($C/bin/jitllm-base)
      # on the card for the fixtures, prompt and decode, chunked and not: md5 equal or the first
      # file that differs (a reshape that must change no bit)
      ids=$(python3 -c "print(' '.join(str((i*37+11)%500+3) for i in range(80)))")
      for bin in jitllm jitllm-base; do
        mkdir -p /tmp/sl/$bin
        for f in $C/shared/oracle/models/synth-llama.*.gguf $C/shared/oracle/pydoc-llama/*.gguf; do
          b=$(basename $f .gguf)
          for ch in 256 16 7; do
            /tmp/bin/$bin eval -m $f --ids "1 $ids" -b $ch --devices cuda --logits /tmp/sl/$bin/$b.b$ch.f32 >/dev/null 2>/tmp/sl/$bin/$b.b$ch.err || echo "FAIL $bin $b $ch"
          done
          /tmp/bin/$bin run -m $f -p "1 $ids" -n 40 --temp 0 --ids --devices cuda 2>/dev/null | tail -n 1 > /tmp/sl/$bin/$b.run.txt
        done
        (cd /tmp/sl/$bin && md5sum *.f32 *.txt) > $OUT/samelogits_$bin.md5
      done
      if diff $OUT/samelogits_jitllm.md5 $OUT/samelogits_jitllm-base.md5 > $OUT/samelogits.diff; then
        echo "samelogits: $(wc -l < $OUT/samelogits_jitllm.md5) files identical" | tee -a $OUT/samelogits.log
      else
        echo "samelogits: DIFFERENT" | tee -a $OUT/samelogits.log; head -n 20 $OUT/samelogits.diff
      fi
      ;;
    tests)
      /tmp/bin/test_backend_cuda_nogpu 2>&1 | tail -n 5 | tee $OUT/nogpu.log
      timeout 300 /tmp/bin/test_backend_cuda ${GTEST_ARGS:-} 2>&1 | tee $OUT/gpu_tests.log | grep -E "^\[ cuda|FAILED|PASSED|Failure|error|Expected|Which is|actual|rel err" | head -n 150
      ;;
    cache)
      M=$C/shared/oracle/models/synth-llama.Q4_K_M.gguf
      rm -rf /tmp/xdg-cache
      for i in 1 2; do
        XDG_CACHE_HOME=/tmp/xdg-cache JITLLM_CUDA_STATS=1 /tmp/bin/jitllm run -m $M --ids -p "1 5 9" -n 8 --temp 0 --devices cuda 2>&1 | tail -n 3 | tee -a $OUT/cache.log
      done
      ;;
    speed)
      for shape in llama-3.2-1b llama-3.1-8b; do
        /usr/bin/time -f "synth %e s" /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 2
        JITLLM_CUDA_STATS=1 /tmp/bin/jitllm speed -m /tmp/$shape.gguf -p ${PP:-512} -n 128 -r 3 --devices cuda --ttft 2>&1 | tee -a $OUT/speed.log
      done
      ;;
    bench)  # cudadecode: matvec time per shape and rows per warp (% of the read wall)
      JITLLM_CUDA_BENCH=1 timeout 240 /tmp/bin/test_backend_cuda --gtest_filter='CudaBench.*' 2>&1 |
        tee $OUT/bench.log | grep -E "bench|FAILED|Failure" | head -n 300
      ;;
    splitk)  # split-K decode attention tests (incl. the automatic choice), then decode after
      # SPLITK_P-token prompts (jitllm batched -s SPLITK_S: tok/s of the steps after the prompt) with
      # JITLLM_CUDA_SPLITK never (0), automatic (auto, the default) and always (32)
      timeout 120 /tmp/bin/test_backend_cuda --gtest_filter='CudaSplitAttention.*' 2>&1 |
        tee $OUT/splitk_tests.log | grep -E "^\[ cuda|FAILED|PASSED|Failure|Expected|Which is" | head -n 40
      for shape in llama-3.2-1b llama-3.1-8b; do
        [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
        for sk in ${SPLITK_SETTINGS:-0 auto 32 auto 0}; do
          echo "== $shape JITLLM_CUDA_SPLITK=$sk" | tee -a $OUT/splitk.log
          JITLLM_CUDA_SPLITK=$sk /tmp/bin/jitllm batched -m /tmp/$shape.gguf -s ${SPLITK_S:-1,4,32} -p ${SPLITK_P:-4096} -n 64 --devices cuda 2>&1 |
            grep sessions | tee -a $OUT/splitk.log
        done
      done
      ;;
    profile)  # cudadecode: per-kernel time of decode steps (every launch timed, no graphs)
      for shape in llama-3.2-1b llama-3.1-8b; do
        [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
        echo "== profile $shape" | tee -a $OUT/profile.log
        JITLLM_CUDA_PROFILE=1 /tmp/bin/jitllm speed -m /tmp/$shape.gguf -p 0 -n 8 -r 1 --devices cuda 2>&1 | head -n 40 | tee -a $OUT/profile.log
      done
      ;;
    decodeab)  # gpudecode: tg128 per variant (DECODE_ENVS: ';'-separated; default: the defaults, the
      # logits path, each decode epilogue alone)
      IFS=';' read -ra variants <<< "${DECODE_ENVS:-;--logits;JITLLM_CUDA_FUSE=0}"
      for shape in llama-3.2-1b llama-3.1-8b; do
        [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
        for v in "${variants[@]}"; do
          echo "== $shape $v" | tee -a $OUT/decodeab.log
          # A variant's words: NAME=value settings for the environment, --flags for jitllm speed.
          envs=() flags=()
          for word in $v; do if [[ $word == --* ]]; then flags+=("$word"); else envs+=("$word"); fi; done
          env "${envs[@]}" JITLLM_CUDA_STATS=1 /tmp/bin/jitllm speed -m /tmp/$shape.gguf -p 0 -n 128 -r 2 --devices cuda "${flags[@]}" 2>&1 |
            grep -E "tg|decode:|replayed steps" | tee -a $OUT/decodeab.log
        done
      done
      ;;
    serve)  # jitllmd on the card under bench/serve/load.py (closed-loop streaming clients), then
      # `jitllm batched` with the same sessions: the engine the server should deliver. Needs
      # jitllmd in the carry (make_carry.sh BINS=...).
      shape=${SERVE_SHAPE:-llama-3.1-8b}
      [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
      t0=$(date +%s.%N)
      /tmp/bin/jitllmd serve -m /tmp/$shape.gguf --devices cuda --parallel ${SERVE_PARALLEL:-64} \
        --port 18080 --log-level warn ${SERVE_FLAGS:-} > $OUT/serve_jitllmd.log 2>&1 &
      SPID=$!
      wait_ready 18080 300 && echo "jitllmd ready after $(seconds_since $t0) s" | tee $OUT/serve.log
      # Per client count, the server's own split of a token's time (/metrics): the engine step
      # against the scheduler's whole iteration.
      for c in $(echo ${SERVE_CLIENTS:-1,16,64} | tr ',' ' '); do
        curl -s localhost:18080/metrics > /tmp/m0
        python3 bench/serve/load.py --url http://127.0.0.1:18080 --clients $c \
          --seconds ${SERVE_S:-15} --prompt-tokens ${SERVE_PROMPT:-128} ${SERVE_EXTRA:+--extra "$SERVE_EXTRA"} --json $OUT/serve_$c.json 2>&1 | tee -a $OUT/serve.log
        curl -s localhost:18080/metrics > /tmp/m1
        python3 - <<'PY' | tee -a $OUT/serve.log
def read(path):
    v = {}
    for line in open(path):
        if line.startswith("jitllm_") and ("_sum" in line or "_count" in line) and "{" not in line.split()[0]:
            k, x = line.split()[:2]
            v[k] = float(x)
    return v
a, b = read("/tmp/m0"), read("/tmp/m1")
def mean_ms(name):
    n = b.get(f"jitllm_{name}_count", 0) - a.get(f"jitllm_{name}_count", 0)
    return (1000 * (b.get(f"jitllm_{name}_sum", 0) - a.get(f"jitllm_{name}_sum", 0)) / n, int(n)) if n else (0, 0)
st, it = mean_ms("step_seconds"), mean_ms("iteration_seconds")
print(f"  server split: step {st[0]:.2f} ms x {st[1]}, iteration {it[0]:.2f} ms x {it[1]}")
def phases(path):
    v = {}
    for line in open(path):
        if line.startswith('jitllm_scheduler_seconds_total{phase="'):
            k, x = line.split()[:2]
            v[k.split('"')[1]] = float(x)
    return v
pa, pb = phases("/tmp/m0"), phases("/tmp/m1")
if it[1]:
    print("  per iteration (ms): " + ", ".join(
        f"{k} {1000 * (pb[k] - pa.get(k, 0)) / it[1]:.3f}" for k in sorted(pb)))
PY
      done
      kill $SPID; wait $SPID
      tail -n 5 $OUT/serve_jitllmd.log
      /tmp/bin/jitllm batched -m /tmp/$shape.gguf -s ${SERVE_CLIENTS:-1,16,64} -p 128 -n 128 --devices cuda 2>&1 |
        grep -E "sessions|rror" | tee -a $OUT/serve.log
      ;;
    coldstart)  # seconds from `jitllmd serve` to /health ok on a fresh cubin cache (every kernel
      # compiled), arms interleaved over COLD_ARMS (default "base new new base": jitllmd-base is
      # an earlier build carried as BASE_SERVE_BIN, new this one), then once more on a warm cache.
      shape=${SERVE_SHAPE:-llama-3.1-8b}
      [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
      i=0
      for arm in ${COLD_ARMS:-base new new base} warm; do
        bin=/tmp/bin/jitllmd; [ $arm = base ] && bin=/tmp/bin/jitllmd-base
        [ -x $bin ] || { echo "coldstart: no $bin"; continue; }
        i=$((i + 1)); cache=/tmp/xdg-cold-$i; [ $arm = warm ] && cache=/tmp/xdg-cold-2
        [ $arm = warm ] || rm -rf $cache
        t0=$(date +%s.%N)
        XDG_CACHE_HOME=$cache JITLLM_CUDA_STATS=1 $bin serve -m /tmp/$shape.gguf --devices cuda \
          --parallel ${SERVE_PARALLEL:-64} --port 18082 --log-level warn > $OUT/cold_$i.log 2>&1 &
        CPID=$!
        if wait_ready 18082 ${COLD_LIMIT_S:-200}; then r=$(seconds_since $t0); else r="not ready"; fi
        kill $CPID; wait $CPID
        echo "coldstart $arm: ready after $r s; $(grep -o 'kernels compiled.*disk cache [0-9]*' $OUT/cold_$i.log)" | tee -a $OUT/coldstart.log
      done
      ;;
    peerserve)  # llama-server on the same file under the same client (after `serve`, which made the
      # file): the peer row of issue 19's table. Needs the peer build (.peer/build.sh carried).
      shape=${SERVE_SHAPE:-llama-3.1-8b}
      peer_build_start
      [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
      peer_build_wait
      np=${SERVE_PARALLEL:-64}
      [ -x $LB/llama-server ] || { echo "peerserve: no llama-server (the peer build failed)"; continue; }
      $LB/llama-server -m /tmp/$shape.gguf -ngl 999 -np $np -c $((np * 512)) --port 18081 \
        > $OUT/serve_llama.log 2>&1 &
      LPID=$!
      t0=$(date +%s.%N)
      wait_ready 18081 90 && echo "llama-server ready after $(seconds_since $t0) s" | tee -a $OUT/serve.log
      python3 bench/serve/load.py --url http://127.0.0.1:18081 --clients ${SERVE_CLIENTS:-1,16,64} \
        --seconds ${SERVE_S:-15} --prompt-tokens ${SERVE_PROMPT:-128} ${SERVE_EXTRA:+--extra "$SERVE_EXTRA"} --json $OUT/serve_llama.json 2>&1 | tee -a $OUT/serve.log
      kill $LPID; wait $LPID
      ;;
    constrained)  # the cost of constrained output in jitllmd on the card, then its correctness
      shape=${SERVE_SHAPE:-llama-3.1-8b}
      [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
      /tmp/bin/jitllmd serve -m /tmp/$shape.gguf --devices cuda --parallel 32 --port 18080 \
        --log-level warn > $OUT/constrained_jitllmd.log 2>&1 &
      SPID=$!
      for _ in $(seq 1 1200); do curl -sf localhost:18080/health > /dev/null && break; sleep 0.25; done
      # Arms interleaved A B C C B A per client count: free text; a JSON string of >= 2000
      # characters (most tokens allowed, the greedy pick stands); lowercase words (GBNF; few
      # tokens allowed, a mask every step). Both constrained arms run to max_tokens as free does.
      for c in ${CONSTRAINED_CLIENTS:-1 32}; do
        for arm in free string letters letters string free; do
          case $arm in
            free) extra='{}' ;;
            string) extra='{"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "string", "minLength": 2000}}}}' ;;
            letters) extra='{"grammar": "root ::= [a-z ]+"}' ;;
          esac
          before=$(curl -s localhost:18080/metrics | grep -E "^jitllm_grammar_seconds_(sum|count)" | awk '{print $2}' | tr '\n' ' ')
          echo -n "$arm " | tee -a $OUT/constrained.log
          python3 bench/serve/load.py --url http://127.0.0.1:18080 --clients $c --seconds ${SERVE_S:-10} \
            --extra "$extra" 2>&1 | tee -a $OUT/constrained.log
          after=$(curl -s localhost:18080/metrics | grep -E "^jitllm_grammar_seconds_(sum|count)" | awk '{print $2}' | tr '\n' ' ')
          python3 -c "import sys; b=[float(x) for x in '${before:-0 0}'.split()] or [0,0]; a=[float(x) for x in '${after:-0 0}'.split()]; n=a[1]-b[1]; print('  grammar per constrained token: %.3f ms over %d tokens' % (1000*(a[0]-b[0])/n, n) if n > 0 else '  no constrained tokens')" | tee -a $OUT/constrained.log
        done
      done
      kill $SPID; wait $SPID
      ;;
    schemas)  # structured output and tool calls against jitllmd on the card (the bundled model)
      /tmp/bin/jitllmd serve --devices cuda --port 18081 --log-level warn > $OUT/constrained_demo.log 2>&1 &
      SPID=$!
      for _ in $(seq 1 1200); do curl -sf localhost:18081/health > /dev/null && break; sleep 0.25; done
      # Without python3-jsonschema here, the outputs come back in $OUT to be validated on the
      # dev box: python3 tests/server_it/schema_check.py FILE.
      python3 tests/server_it/structured_output.py http://127.0.0.1:18081 --record $OUT/schemas_structured.json 2>&1 | tail -n 3 | tee -a $OUT/constrained.log
      python3 tests/server_it/tool_calls.py http://127.0.0.1:18081 --record $OUT/schemas_tools.json 2>&1 | tail -n 3 | tee -a $OUT/constrained.log
      kill $SPID; wait $SPID
      ;;
    batched)  # cudadecode: N sessions decoding together (total tok/s)
      for shape in llama-3.2-1b llama-3.1-8b; do
        [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
        echo "== batched $shape" | tee -a $OUT/batched.log
        /tmp/bin/jitllm batched -m /tmp/$shape.gguf -s ${SESSIONS:-1,8,32,64} -p 16 -n 48 --devices cuda 2>&1 | tee -a $OUT/batched.log
      done
      ;;
    mmq)  # gpubatch: MMQ kernel + N-sessions + engine tests (1B included), jitllm batched per
      # MMQ_ENVS variant (';'-separated), the kernel split of 32-session steps, then MMQ vs matvec
      # vs GEMM timings (MMQ_BENCH=quick: 8B q/o, gate, head only; 0: none)
      for shape in llama-3.2-1b llama-3.1-8b; do
        [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
      done
      JITLLM_TEST_1B=/tmp/llama-3.2-1b.gguf timeout 300 /tmp/bin/test_backend_cuda --gtest_filter=${MMQ_TESTS:-'CudaMmq.*:CudaBatched.*'} 2>&1 |
        tee $OUT/mmq_tests.log | grep -E "^\[ cuda|FAILED|PASSED|Failure|Expected|Which is|actual" | head -n 80
      IFS=';' read -ra variants <<< "${MMQ_ENVS:-JITLLM_CUDA_MMQ=0;JITLLM_CUDA_MMQ=1}"
      for shape in llama-3.2-1b llama-3.1-8b; do
        for v in "${variants[@]}"; do
          echo "== batched $shape $v" | tee -a $OUT/mmq_batched.log
          env $v /tmp/bin/jitllm batched -m /tmp/$shape.gguf -s ${SESSIONS:-1,8,32,64} -p 128 -n ${MMQ_GEN:-128} --devices cuda 2>&1 |
            grep -E "sessions|step reads|rror" | tee -a $OUT/mmq_batched.log
        done
      done
      # 1-token prompts: the profile is mostly the 32-row decode steps.
      echo "== profile 8B, 32 sessions" | tee -a $OUT/mmq_profile.log
      JITLLM_CUDA_PROFILE=1 /tmp/bin/jitllm batched -m /tmp/llama-3.1-8b.gguf -s 32 -p 1 -n 16 --devices cuda 2>&1 |
        tail -n 40 | tee -a $OUT/mmq_profile.log
      if [ "${MMQ_BENCH:-1}" != 0 ]; then
        JITLLM_CUDA_BENCH=${MMQ_BENCH:-1} timeout 240 /tmp/bin/test_backend_cuda --gtest_filter='CudaBench.MmqShapes' 2>&1 |
          tee $OUT/mmq_bench.log | grep -E "bench|FAILED|Failure" | head -n 200
      fi
      ;;
    formats)  # gpuformats: the native block formats: tests, matvec GB/s at 14336x4096, 1B Q4_0 native vs F16 (weights MB on the card, pp512, tg)
      timeout ${FORMATS_TEST_S:-150} /tmp/bin/test_backend_cuda --gtest_filter="${FORMATS_FILTER:-CudaFormats*:*Fixture*}" 2>&1 |
        tee $OUT/formats_tests.log | grep -E "^\[ cuda|FAILED|PASSED|Failure|Expected|Which is|actual" | head -n 250
      JITLLM_CUDA_BENCH=1 timeout 120 /tmp/bin/test_backend_cuda --gtest_filter='CudaFormatsBench.*' 2>&1 |
        tee $OUT/formats_bench.log | grep -E "bench|FAILED|Failure"
      /tmp/bin/jitllm synth /tmp/llama-3.2-1b-q4_0.gguf --shape llama-3.2-1b --type q4_0 2>&1 | tail -n 1
      for nat in 1 0; do
        echo "== llama-3.2-1b q4_0 JITLLM_CUDA_NATIVE_FORMATS=$nat" | tee -a $OUT/formats_speed.log
        JITLLM_CUDA_NATIVE_FORMATS=$nat JITLLM_CUDA_STATS=1 /tmp/bin/jitllm speed -m /tmp/llama-3.2-1b-q4_0.gguf -p 512 -n 64 -r 2 --devices cuda 2>&1 | tee -a $OUT/formats_speed.log | grep -E "pp|tg|weights|rror"
      done
      ;;
    prefill)  # cudaprefill: GEMM/flash/embedding tests, GEMM vs matvec and flash vs paged timings
      timeout 300 /tmp/bin/test_backend_cuda --gtest_also_run_disabled_tests \
        --gtest_filter='CudaGemm.*:CudaFlashAttention.*' 2>&1 | tee $OUT/prefill_tests.log |
        grep -E "^\[ cuda|FAILED|PASSED|Failure|Expected|Which is|actual" | head -n 150
      ;;
    gputests)  # the GPU tests alone (no NVRTC-only tests)
      timeout 300 /tmp/bin/test_backend_cuda ${GTEST_ARGS:-} 2>&1 | tee $OUT/gpu_tests.log | grep -E "^\[ cuda|FAILED|PASSED|Failure|error|Expected|Which is|actual|rel err" | head -n 200
      ;;
    speedq8)  # cudaprefill: synthetic Llama-3.1-8B Q8_0, pp512 / tg128 with --ttft
      /tmp/bin/jitllm synth /tmp/llama-3.1-8b-q8.gguf --shape llama-3.1-8b --type q8_0 2>&1 | tail -n 1
      JITLLM_CUDA_STATS=1 /tmp/bin/jitllm speed -m /tmp/llama-3.1-8b-q8.gguf -p ${PP:-512} -n 128 -r 3 --devices cuda --ttft 2>&1 | tee -a $OUT/speed.log
      ;;
    placement)  # gpuplace: placement tests (k of n layers on the card, two cards when there are),
      # then the 8B Q4_K_M all on card 0, with a --vram-budget that holds half its layers (the
      # host half on the CPU JIT kernels) and, on a 2-card machine, split over both cards; the
      # greedy tokens of each (jitllm run --ids) must be the same.
      M1=/tmp/llama-3.2-1b.gguf
      [ -f $M1 ] || /tmp/bin/jitllm synth $M1 --shape llama-3.2-1b --type q4_k_m 2>&1 | tail -n 1
      JITLLM_PLACEMENT_MODEL=$M1 timeout 240 /tmp/bin/test_backend_cuda --gtest_filter='*CudaPlacement*' 2>&1 | tee $OUT/placement_tests.log |
        grep -E "^\[ cuda|FAILED|PASSED|OK \]|Failure|Expected|Which is|actual|offloaded|skipped|SKIPPED" | head -n 80
      M8=/tmp/llama-3.1-8b.gguf
      [ -f $M8 ] || /tmp/bin/jitllm synth $M8 --shape llama-3.1-8b --type q4_k_m 2>&1 | tail -n 1
      P8="-p 128 -n 64 -r 1"
      /tmp/bin/jitllm speed -m $M8 $P8 --devices cuda:0 2>&1 | tee $OUT/place_all.log | grep -E "tg|pp|offloaded|cuda:0|host|costs|scratch"
      # The budget that holds the first 16 layers: what card 0 uses with --gpu-layers 16 (same
      # step size, so the same scratch), less the embedding when it went there too, + 2 MB.
      /tmp/bin/jitllm speed -m $M8 -p 128 -n 1 -r 1 --devices cuda:0 --gpu-layers 16 > $OUT/place_ngl.log 2>&1
      half=$(awk '/unit costs/ {e = $14} $1 == "cuda:0" {u = $8; y = $3}
                  END {printf "%d", u - (y == "yes" ? e : 0) + 2}' $OUT/place_ngl.log)
      echo "half budget: ${half}M" | tee -a $OUT/placement.log
      /tmp/bin/jitllm speed -m $M8 $P8 --devices cuda:0 --vram-budget ${half}M 2>&1 | tee $OUT/place_half.log | grep -E "tg|pp|offloaded|cuda:0|host|kernels"
      ids="The quick brown fox jumps over the lazy dog"
      for d in "--devices cuda:0" "--devices cuda:0 --vram-budget ${half}M"; do
        echo "== run $d: $(/tmp/bin/jitllm run -m $M8 --ids -p "$ids" -n 16 --temp 0 $d 2>/dev/null | tail -n 1)" | tee -a $OUT/placement.log
      done
      if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
        /tmp/bin/jitllm speed -m $M8 $P8 --devices cuda --vram-budget ${half}M,1T 2>&1 | tee $OUT/place_two.log | grep -E "tg|pp|offloaded|cuda:|host"
        echo "== run two cards: $(/tmp/bin/jitllm run -m $M8 --ids -p "$ids" -n 16 --temp 0 --devices cuda --vram-budget ${half}M,1T 2>/dev/null | tail -n 1)" | tee -a $OUT/placement.log
      fi
      ;;
    speedab)  # cudaprefill: pp512 with the GEMM and flash attention off (the old path), then on
      for shape in llama-3.2-1b llama-3.1-8b; do
        [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
        for v in ${AB_VARIANTS:-0:0 1:0 1:1}; do set -- ${v/:/ }
          echo "== $shape gemm=$1 flash=$2" | tee -a $OUT/speedab.log
          JITLLM_CUDA_GEMM=$1 JITLLM_CUDA_FLASH=$2 /tmp/bin/jitllm speed -m /tmp/$shape.gguf -p ${PP:-512} -n 16 -r 3 --devices cuda 2>&1 | tee -a $OUT/speedab.log
        done
      done
      ;;
    dq)  # session 4: DQ-MMA tests, N-sessions engine tests (DQ-MMA by default), the kernel bench at
      # n = 8..64 (8B q/o, gate, head), jitllm batched with the int8 MMQ and with DQ-MMA, then tg128
      # with PDL off and on (PDL_MODES; A B B A order)
      for shape in llama-3.2-1b llama-3.1-8b; do
        [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
      done
      JITLLM_TEST_1B=/tmp/llama-3.2-1b.gguf timeout ${DQ_TEST_S:-200} /tmp/bin/test_backend_cuda --gtest_filter=${DQ_TESTS:-'CudaDqMma.*:CudaBatched.*'} 2>&1 |
        tee $OUT/dq_tests.log | grep -E "^\[ cuda|FAILED|PASSED|Failure|Expected|Which is|actual" | head -n 60
      for v in ${PDL_TEST_MODES-3}; do
        JITLLM_CUDA_PDL=$v timeout 120 /tmp/bin/test_backend_cuda --gtest_filter='CudaEngine.*:Fixtures/CudaFixture.*/Q4_K_M:Fixtures/CudaFixture.*/Q6_K' 2>&1 |
          tee $OUT/pdl${v}_tests.log | grep -E "FAILED|PASSED|Failure|Expected|Which is" | head -n 30
      done
      JITLLM_CUDA_BENCH=quick timeout 150 /tmp/bin/test_backend_cuda --gtest_filter='CudaBench.MmqShapes' 2>&1 |
        tee $OUT/dq_bench.log | grep -E "bench.*(mmq|dqmma)|FAILED|Failure" | head -n 80
      IFS=';' read -ra dqv <<< "${DQ_ENVS:-JITLLM_CUDA_DQMMA=0;JITLLM_CUDA_DQMMA=1}"
      for v in "${dqv[@]}"; do
        echo "== batched 8B $v" | tee -a $OUT/dq_batched.log
        env $v /tmp/bin/jitllm batched -m /tmp/llama-3.1-8b.gguf -s ${SESSIONS:-8,32,64} -p 128 -n 64 --devices cuda 2>&1 |
          grep -E "sessions|step reads|rror" | tee -a $OUT/dq_batched.log
      done
      for shape in llama-3.2-1b llama-3.1-8b; do
        for v in ${PDL_MODES-0 3 3 0}; do
          echo "== $shape JITLLM_CUDA_PDL=$v" | tee -a $OUT/pdl.log
          JITLLM_CUDA_PDL=$v /tmp/bin/jitllm speed -m /tmp/$shape.gguf -p 0 -n 128 -r 2 --devices cuda 2>&1 | grep -E "tg|rror" | tee -a $OUT/pdl.log
        done
      done
      ;;
    dqprofile)  # the kernel split of 32-session 8B decode steps (every launch timed, graphs off),
      # PROFILE_P-token prompts, per PROFILE_ENVS variant (';'-separated env settings)
      [ -f /tmp/llama-3.1-8b.gguf ] || /tmp/bin/jitllm synth /tmp/llama-3.1-8b.gguf --shape llama-3.1-8b --type q4_k_m 2>&1 | tail -n 1
      IFS=';' read -ra pv <<< "${PROFILE_ENVS:-X=1}"
      for v in "${pv[@]}"; do
        echo "== profile 8B 32 sessions, ${PROFILE_P:-1}-token prompts, $v" | tee -a $OUT/dq_profile.log
        env $v JITLLM_CUDA_PROFILE=1 /tmp/bin/jitllm batched -m /tmp/llama-3.1-8b.gguf -s 32 -p ${PROFILE_P:-1} -n 16 --devices cuda 2>&1 |
          tail -n ${PROFILE_LINES:-40} | tee -a $OUT/dq_profile.log
      done
      ;;
    peer)  # start building the peer in the background now (the stages that use it wait for it)
      peer_build_start
      ;;
    sidebyside)  # jitllm and the peer A B B A on the same synthetic files: speed (pp512 / tg128) on
      # 1B and 8B Q4_K_M, sessions together on 8B. The peer's binaries are built outside the repo:
      # a carried, ignored .peer/build.sh (if present) builds them into $LLAMA_BIN in the background
      # while the GPU tests run; the repo keeps no recipe for them.
      peer_build_start
      for shape in llama-3.2-1b llama-3.1-8b; do
        [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
      done
      JITLLM_TEST_1B=/tmp/llama-3.2-1b.gguf timeout ${SBS_TEST_S:-200} /tmp/bin/test_backend_cuda --gtest_filter="${SBS_TESTS:-*}" 2>&1 |
        tee $OUT/gpu_tests.log | grep -E "FAILED|PASSED|tests ran" | head -n 30
      peer_build_wait
      for shape in llama-3.2-1b llama-3.1-8b; do
        M=/tmp/$shape.gguf
        for arm in A B B A; do
          echo "== $shape $arm" | tee -a $OUT/sbs.log
          if [ $arm = A ]; then
            /tmp/bin/jitllm speed -m $M -p 512 -n 128 -r 3 --devices cuda 2>&1 | grep -E "pp512|tg128|decode:" | tee -a $OUT/sbs.log
          else
            $LB/llama-bench -m $M -ngl 99 -p 512 -n 128 -r 3 2>&1 | grep -E "pp512|tg128" | tee -a $OUT/sbs.log
          fi
        done
      done
      M=/tmp/llama-3.1-8b.gguf
      echo "== batched 8B jitllm" | tee -a $OUT/sbs.log
      /tmp/bin/jitllm batched -m $M -s 1,8,32 -p 128 -n 128 --devices cuda 2>&1 | grep sessions | tee -a $OUT/sbs.log
      echo "== batched 8B llama.cpp" | tee -a $OUT/sbs.log
      $LB/llama-batched-bench -m $M -ngl 99 -c 16384 -npp 128 -ntg 128 -npl 1,8,32 2>&1 | grep -E "^\|" | tee -a $OUT/sbs.log
      # Variants of jitllm's batched path (SBS_DQ_ENVS, ';'-separated), 32 sessions, after the pair.
      IFS=';' read -ra sv <<< "${SBS_DQ_ENVS:-}"
      for v in "${sv[@]}"; do
        echo "== batched 8B jitllm $v" | tee -a $OUT/sbs.log
        env $v /tmp/bin/jitllm batched -m $M -s 32 -p 128 -n 128 --devices cuda 2>&1 | grep sessions | tee -a $OUT/sbs.log
      done
      ;;
    sessions)  # session 5: N sessions together side by side (8B Q4_K_M, 128-token prompts, 128
      # steps): GPU tests (SBS_TESTS) while the peer builds, the DQ-MMA kernel bench at n = 32,
      # jitllm batched and llama-batched-bench, jitllm variants (SBS_DQ_ENVS), the 32-session profile
      peer_build_start
      M=/tmp/${SESSIONS_SHAPE:-llama-3.1-8b}.gguf
      [ -f $M ] || /tmp/bin/jitllm synth $M --shape ${SESSIONS_SHAPE:-llama-3.1-8b} --type q4_k_m 2>&1 | tail -n 1
      [ -f /tmp/llama-3.2-1b.gguf ] || /tmp/bin/jitllm synth /tmp/llama-3.2-1b.gguf --shape llama-3.2-1b --type q4_k_m 2>&1 | tail -n 1
      JITLLM_TEST_1B=/tmp/llama-3.2-1b.gguf timeout ${SBS_TEST_S:-200} /tmp/bin/test_backend_cuda --gtest_filter="${SBS_TESTS:-*}" 2>&1 |
        tee $OUT/gpu_tests.log | grep -E "FAILED|PASSED|tests ran" | head -n 30
      JITLLM_CUDA_BENCH=dq timeout 120 /tmp/bin/test_backend_cuda --gtest_filter='CudaBench.MmqShapes' 2>&1 |
        tee $OUT/dq_bench.log | grep -E "bench|FAILED|Failure" | head -n 80
      peer_build_wait
      echo "== batched 8B jitllm" | tee -a $OUT/sbs.log
      /tmp/bin/jitllm batched -m $M -s ${SESSIONS:-1,8,32} -p 128 -n 128 --devices cuda 2>&1 | grep -E "sessions|step reads|rror" | tee -a $OUT/sbs.log
      echo "== batched 8B llama.cpp" | tee -a $OUT/sbs.log
      $LB/llama-batched-bench -m $M -ngl 99 -c 16384 -npp 128 -ntg 128 -npl ${SESSIONS:-1,8,32} 2>&1 | grep -E "^\|" | tee -a $OUT/sbs.log
      IFS=';' read -ra sv <<< "${SBS_DQ_ENVS:-}"
      for v in "${sv[@]}"; do
        echo "== batched 8B jitllm $v" | tee -a $OUT/sbs.log
        env $v /tmp/bin/jitllm batched -m $M -s 32 -p 128 -n 128 --devices cuda 2>&1 | grep -E "sessions|step reads|rror" | tee -a $OUT/sbs.log
      done
      echo "== batched 8B jitllm (again)" | tee -a $OUT/sbs.log
      /tmp/bin/jitllm batched -m $M -s 32 -p 128 -n 128 --devices cuda 2>&1 | grep -E "sessions|step reads|rror" | tee -a $OUT/sbs.log
      JITLLM_CUDA_PROFILE=1 /tmp/bin/jitllm batched -m $M -s 32 -p 1 -n 16 --devices cuda 2>&1 |
        tail -n 40 | tee -a $OUT/dq_profile.log
      ;;
    dqswiglu)  # DQ-MMA's SwiGLU epilogue (JITLLM_CUDA_DQ_SWIGLU, on by default since session 6): the kernel test
      # (bitwise vs gate/up then swiglu_q8), the N-sessions engine tests with it on, then jitllm
      # batched 8B 32 sessions off / on / on / off
      M=/tmp/${SESSIONS_SHAPE:-llama-3.1-8b}.gguf
      [ -f $M ] || /tmp/bin/jitllm synth $M --shape ${SESSIONS_SHAPE:-llama-3.1-8b} --type q4_k_m 2>&1 | tail -n 1
      timeout 60 /tmp/bin/test_backend_cuda --gtest_filter='CudaDecodeFusion.DqSwiglu*' 2>&1 |
        tee $OUT/dqswiglu_tests.log | grep -E "FAILED|PASSED|Failure|swiglu" | head -n 20
      JITLLM_CUDA_DQ_SWIGLU=1 timeout 120 /tmp/bin/test_backend_cuda --gtest_filter='CudaBatched.SessionsTogether*:CudaWarmUp.*' 2>&1 |
        tee $OUT/dqswiglu_engine.log | grep -E "FAILED|PASSED|Failure|sessions together" | head -n 20
      for v in 0 1 1 0; do
        echo "== batched 8B JITLLM_CUDA_DQ_SWIGLU=$v" | tee -a $OUT/dqswiglu.log
        JITLLM_CUDA_DQ_SWIGLU=$v /tmp/bin/jitllm batched -m $M -s 32 -p 128 -n 128 --devices cuda 2>&1 | grep -E "sessions|step reads|rror" | tee -a $OUT/dqswiglu.log
      done
      ;;
    ncu)  # session 6: Nsight Compute on the DQ-MMA launches of 32-session 8B decode steps (q/k/v,
      # wo, gate/up, ffn_down, ...: NCU_COUNT launches after NCU_SKIP): speed of light, occupancy,
      # launch shape, warp stall reasons. Needs the Firecracker runtime (gVisor has no counters).
      peer_build_start
      M=/tmp/${SESSIONS_SHAPE:-llama-3.1-8b}.gguf
      [ -f $M ] || /tmp/bin/jitllm synth $M --shape ${SESSIONS_SHAPE:-llama-3.1-8b} --type q4_k_m 2>&1 | tail -n 1
      NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
      echo "ncu: $NCU" | tee $OUT/ncu.log
      JITLLM_CUDA_GRAPH=0 timeout ${NCU_S:-240} $NCU --clock-control none --kernel-name regex:${NCU_KERNEL:-dqmma} \
        --launch-skip ${NCU_SKIP:-700} --launch-count ${NCU_COUNT:-6} --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
        --print-details all /tmp/bin/jitllm batched -m $M -s 32 -p 1 -n 12 --devices cuda >> $OUT/ncu.log 2>&1
      grep -E "dqmma|Duration|DRAM Through|Memory Through|Achieved Occ|Theoretical Occ|Registers|Block Size|Grid Size|Stall|Warp Cycles|Issued Warp|No Eligible|Shared Memory Config|Dynamic Shared" $OUT/ncu.log | head -n 200
      ;;
    abvar)  # session 6: 8B 32 sessions (128-token prompts, 128 steps) over VARIANTS (';'-separated
      # env settings): the default, each variant, the variants again in reverse, the default, with
      # llama-batched-bench at 32 sequences after the first and the last default (peer built meanwhile)
      M=/tmp/${SESSIONS_SHAPE:-llama-3.1-8b}.gguf
      [ -f $M ] || /tmp/bin/jitllm synth $M --shape ${SESSIONS_SHAPE:-llama-3.1-8b} --type q4_k_m 2>&1 | tail -n 1
      IFS=';' read -ra vv <<< "${VARIANTS:-}"
      order=("" "${vv[@]}")
      for ((i = ${#vv[@]} - 1; i >= 0; i--)); do order+=("${vv[$i]}"); done
      order+=("")
      peer_build_start
      for i in "${!order[@]}"; do
        v=${order[$i]}
        echo "== batched 8B jitllm ${v:-default}" | tee -a $OUT/abvar.log
        env $v X=1 /tmp/bin/jitllm batched -m $M -s 32 -p 128 -n 128 --devices cuda 2>&1 | grep -E "sessions|step reads|rror" | tee -a $OUT/abvar.log
        if [ $i = 0 ] || [ $i = $((${#order[@]} - 1)) ]; then
          peer_build_wait
          echo "== batched 8B llama.cpp" | tee -a $OUT/abvar.log
          $LB/llama-batched-bench -m $M -ngl 99 -c 16384 -npp 128 -ntg 128 -npl 32 2>&1 | grep -E "^\|" | tee -a $OUT/abvar.log
        fi
      done
      ;;
    gtest)  # session 6: GPU tests per GTEST_RUNS entry ('env settings|filter' items, ';'-separated)
      IFS=';' read -ra gr <<< "${GTEST_RUNS:-}"
      for r in "${gr[@]}"; do
        e=${r%%|*}; f=${r#*|}
        echo "== tests [$e] $f" | tee -a $OUT/gtest.log
        env $e X=1 JITLLM_TEST_1B=/tmp/llama-3.2-1b.gguf timeout ${GTEST_S:-120} /tmp/bin/test_backend_cuda --gtest_filter="$f" 2>&1 |
          tee -a $OUT/gtest_full.log | grep -E "FAILED|PASSED|tests ran|Failure|Expected|Which is|max|sessions together" | head -n 30 | tee -a $OUT/gtest.log
      done
      ;;
    moe)  # a first look at an MoE shape (MOE_SHAPE, default qwen3-30b-a3b Q4_K_M): jitllm speed
      # and batched, then llama-bench and llama-batched-bench on the same file (single runs; the
      # board / boardsessions stages give the paired rows)
      peer_build_start
      shape=${MOE_SHAPE:-qwen3-30b-a3b}
      [ -f /tmp/$shape.gguf ] || /usr/bin/time -f "synth %e s" /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 2
      JITLLM_CUDA_STATS=1 /tmp/bin/jitllm speed -m /tmp/$shape.gguf -p 512 -n 128 -r 2 --devices cuda 2>&1 | tee -a $OUT/moe.log
      /tmp/bin/jitllm batched -m /tmp/$shape.gguf -s ${SESSIONS:-1,32} -p 128 -n 64 --devices cuda 2>&1 | tee -a $OUT/moe.log
      peer_build_wait
      $LB/llama-bench -m /tmp/$shape.gguf -ngl 99 -p 512 -n 128 -r 2 2>&1 | tail -n 5 | tee -a $OUT/moe.log
      $LB/llama-batched-bench -m /tmp/$shape.gguf -ngl 99 -c 16384 -npp 128 -ntg 64 -npl ${SESSIONS:-1,32} 2>&1 | grep -E "^\|" | tee -a $OUT/moe.log
      ;;
    moeab)  # MoE paths: pp512 and N sessions with the grouped expert matvecs (the default) and
      # with JITLLM_CUDA_MOE_GROUPED=65 (per pair up to 64 rows, the host grouping + GEMMs above)
      shape=${MOE_SHAPE:-qwen3-30b-a3b}
      [ -f /tmp/$shape.gguf ] || /usr/bin/time -f "synth %e s" /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 2
      for g in 4 65 4; do
        echo "== JITLLM_CUDA_MOE_GROUPED=$g" | tee -a $OUT/moeab.log
        JITLLM_CUDA_MOE_GROUPED=$g /tmp/bin/jitllm speed -m /tmp/$shape.gguf -p 512 -n 128 -r 2 --devices cuda 2>&1 | grep -E "^pp|^tg|^decode" | tee -a $OUT/moeab.log
        JITLLM_CUDA_MOE_GROUPED=$g /tmp/bin/jitllm batched -m /tmp/$shape.gguf -s ${SESSIONS:-8,32} -p 128 -n 64 --devices cuda 2>&1 | grep -E "sessions|step reads" | tee -a $OUT/moeab.log
      done
      ;;
    board)  # the paired harness on the card (bench/ab/ab.py: A/A self-control first, A B B A
      # rounds, rows refused when IQR/median > 0.10): jitllm speed vs llama-bench on the synthetic
      # files, accepted rows appended to $OUT/cuda.md (for docs/perf/cuda.md); BUILD_REV names the build;
      # BOARD_ARGS: the arguments both arms get (-p 0 -n 128 -r 3 with BOARD_METRICS=tg128: decode alone)
      peer_build_start
      for shape in ${BOARD_SHAPES:-llama-3.2-1b llama-3.1-8b}; do
        [ -f /tmp/$shape.gguf ] || /tmp/bin/jitllm synth /tmp/$shape.gguf --shape $shape --type q4_k_m 2>&1 | tail -n 1
      done
      peer_build_wait
      for shape in ${BOARD_SHAPES:-llama-3.2-1b llama-3.1-8b}; do
        python3 bench/ab/ab.py --backend cuda --model /tmp/$shape.gguf --metrics ${BOARD_METRICS:-pp512,tg128} \
          --a "/tmp/bin/jitllm speed -m {model} --devices cuda ${BOARD_ARGS:--p 512 -n 128 -r 1}" --a-parser auto \
          --b "$LB/llama-bench -m {model} -ngl 99 ${BOARD_ARGS:--p 512 -n 128 -r 1} -o json" --b-parser llama-bench-json \
          --rounds ${ROUNDS:-4} --aa-rounds ${AA_ROUNDS:-2} --out $OUT/cuda.md --build "${BUILD_REV:-unknown}" 2>&1 |
          tee -a $OUT/board.log | tail -n 12
      done
      ;;
    boardsessions)  # the paired harness on sessions together: jitllm batched vs llama-batched-bench,
      # 8B Q4_K_M (SESSIONS_SHAPE: another synth shape), 32 sessions of 128-token prompts + 128 steps (A/A first, A B B A rounds, rows
      # refused when IQR/median > 0.10); SESSIONS_ENV: env settings of arm A; accepted rows in
      # $OUT/cuda-sessions.md
      peer_build_start
      M=/tmp/${SESSIONS_SHAPE:-llama-3.1-8b}.gguf
      [ -f $M ] || /tmp/bin/jitllm synth $M --shape ${SESSIONS_SHAPE:-llama-3.1-8b} --type q4_k_m 2>&1 | tail -n 1
      peer_build_wait
      python3 bench/ab/ab.py --backend cuda --model $M --metrics sessions32 \
        --a "env ${SESSIONS_ENV:-X=1} /tmp/bin/jitllm batched -m {model} -s 32 -p 128 -n 128 --devices cuda" --a-parser jitllm-batched \
        --b "$LB/llama-batched-bench -m {model} -ngl 99 -c 16384 -npp 128 -ntg 128 -npl 32" --b-parser llama-batched-bench-md \
        --rounds ${ROUNDS:-4} --aa-rounds ${AA_ROUNDS:-2} --out $OUT/cuda-sessions.md --build "${BUILD_REV:-unknown}" 2>&1 |
        tee -a $OUT/boardsessions.log | tail -n 12
      ;;
  esac
done
