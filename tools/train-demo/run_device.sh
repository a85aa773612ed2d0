#!/bin/bash
# Runs on the GPU machine (device tool), from the repository root: trains demo-model, computes the
# reference outputs, and packs the results into $OUT (the tool returns at most 8 files of <= 16 MiB,
# so model.safetensors travels in two parts; rejoin with tools/train-demo/unpack_device.sh).
# Usage: tools/train-demo/run_device.sh <train-seconds> [extra train.py args...]
set -euo pipefail
export PYTHONUNBUFFERED=1
SECS=${1:?train seconds}; shift
W=/tmp/demo-out
rm -rf "$W"; mkdir -p "$W/demo"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 tools/train-demo/train.py --corpus data-demo/corpus.txt --out "$W/demo" --log "$W/demo/train_log.json" \
  --train-seconds "$SECS" "$@" 2>&1 | tee "$OUT/train.out"
# a failure here must not lose the trained model: pack whatever exists
python3 tools/train-demo/reference.py --model "$W/demo" 2>&1 | tee "$OUT/reference.out" || echo "reference.py FAILED"
(cd "$W/demo" && sha256sum model.safetensors | tee model.safetensors.sha256)
split -b 12M -d "$W/demo/model.safetensors" "$OUT/model.safetensors.part"
tar -C "$W/demo" --exclude model.safetensors -cf "$OUT/demo-small.tar" .
ls -la "$W/demo" "$OUT"
