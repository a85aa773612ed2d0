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
(cd "$DST" && sha256sum -c model.safetensors.sha256)
