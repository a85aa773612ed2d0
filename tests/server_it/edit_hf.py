#!/usr/bin/env python3
"""Writes a damaged copy of an HF Llama folder with F32 weights (the pydoc fixture), for the
model-fault tests (model_faults.sh). Python's standard library only.

  edit_hf.py SRC DST nan TOKEN   row TOKEN of the embedding becomes NaN (any prompt holding that
                                 token gives NaN logits)
  edit_hf.py SRC DST pad N       the head and the embedding get N rows past the tokenizer's
                                 tokens (vocab_size grows by N, as padded checkpoints do); the
                                 new head rows are the largest rows scaled up, so an unmasked
                                 greedy pick would land in the padding
"""
import json
import shutil
import struct
import sys
from array import array
from pathlib import Path


def read(path):
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    return header, data[8 + n :]


def write(path, tensors):
    """tensors: name -> (shape, bytes), F32."""
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, (shape, blob) in tensors.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    src, dst, what, arg = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    shutil.copytree(src, dst)
    (dst / "model.safetensors").chmod(0o644)
    (dst / "config.json").chmod(0o644)
    header, data = read(src / "model.safetensors")
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", f"{name}: {info['dtype']} (F32 fixtures only)"
        begin, end = info["data_offsets"]
        tensors[name] = (info["shape"], bytearray(data[begin:end]))
    config = json.loads((dst / "config.json").read_text())
    if what == "nan":
        shape, blob = tensors["model.embed_tokens.weight"]
        row = array("f", [float("nan")] * shape[1]).tobytes()
        blob[arg * len(row) : (arg + 1) * len(row)] = row
    elif what == "pad":
        for name in ("model.embed_tokens.weight", "lm_head.weight"):
            shape, blob = tensors[name]
            rows = array("f", bytes(blob))
            width = shape[1]
            norms = [sum(abs(v) for v in rows[r * width : (r + 1) * width]) for r in range(shape[0])]
            big = max(range(shape[0]), key=lambda r: norms[r])
            extra = array("f", [v * 8.0 for v in rows[big * width : (big + 1) * width]] * arg)
            tensors[name] = ([shape[0] + arg, width], bytearray(blob) + extra.tobytes())
        config["vocab_size"] += arg
    else:
        sys.exit(f"unknown edit {what}")
    write(dst / "model.safetensors", {k: (s, bytes(b)) for k, (s, b) in tensors.items()})
    (dst / "config.json").write_text(json.dumps(config, indent=2))


if __name__ == "__main__":
    main()
