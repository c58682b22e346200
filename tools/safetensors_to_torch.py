#!/usr/bin/env python3
"""Rewrites a safetensors file as a torch.save archive of the same tensors
(a dict name -> tensor, in file order), to compare lmc on both containers.

Usage: /usr/bin/python3 tools/safetensors_to_torch.py IN.safetensors OUT.pt
"""
import collections
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
          "U8": torch.uint8, "BOOL": torch.bool}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip())
    raw = open(sys.argv[1], "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    head.pop("__metadata__", None)
    out = collections.OrderedDict()
    for name, t in sorted(head.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        s, e = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[s:e]), dtype=DTYPES[t["dtype"]]).reshape(t["shape"]).clone()
    torch.save(out, sys.argv[2])


if __name__ == "__main__":
    main()
