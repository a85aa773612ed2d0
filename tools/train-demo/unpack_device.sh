#!/bin/bash
# Rebuilds the HF folder from what run_device.sh left in $OUT (model parts + small files), checks
# the safetensors sha256, and installs it as models/demo/ (the model card is kept).
# Usage: tools/train-demo/unpack_device.sh <files_at folder of the device run>
set -euo pipefail
SRC=${1:?device output folder}
DST=$(git rev-parse --show-toplevel)/models/demo
mkdir -p "$DST"
tar -C "$DST" -xf "$SRC/demo-small.tar"
cat "$SRC"/model.safetensors.part* > "$DST/model.safetensors"
want=$(cut -d' ' -f1 "$DST/model.safetensors.sha256")
got=$(sha256sum "$DST/model.safetensors" | cut -d' ' -f1)
[ "$want" = "$got" ] || { echo "model.safetensors sha256 $got != $want (from the device)"; exit 1; }
echo "model.safetensors $got OK"
echo "$got  model.safetensors" > "$DST/model.safetensors.sha256"
