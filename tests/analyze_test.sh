#!/usr/bin/env bash
# analyze_test.sh - `lmc analyze`: exact answers on constructed inputs, the
# output formats, plots and trajectories.
# Usage: tests/analyze_test.sh ./lmc
# Prints "ok - NAME" / "not ok - NAME" per check, then "N passed, M failed".
set -u

LMC=${1:-./lmc}
case "$LMC" in /*) ;; *) LMC="$(pwd)/$LMC" ;; esac
if [ ! -x "$LMC" ]; then
    echo "analyze_test.sh: $LMC is not an executable" >&2
    exit 1
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)

PASS=0
FAIL=0
T=$(mktemp -d "${TMPDIR:-/tmp}/lmc-analyze-test.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

ok()   { PASS=$((PASS + 1)); echo "ok - $1"; }
nok()  { FAIL=$((FAIL + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && echo "#   $2"; return 0; }
check() { # check NAME CONDITION-COMMAND...
    local name=$1; shift
    if "$@"; then ok "$name"; else nok "$name" "failed: $*"; fi
}
# pycheck NAME JSONFILE PYTHON-EXPRESSION-ON-d (d = the parsed JSON; f = first file; dt = its first dtype)
pycheck() {
    local name=$1 file=$2 expr=$3 out
    out=$(python3 - "$file" "$expr" 2>&1 <<'EOF'
import json, math, sys
d = json.load(open(sys.argv[1]))
f = d["checkpoints"][-1]["files"][0]
dt = f["dtypes"][0]
cls = {c["class"]: c for c in dt["classes"]}
ten = {t["name"]: t for t in dt["tensors"]}
r = eval(sys.argv[2])
if r is not True:
    print("expression gave", repr(r))
    sys.exit(1)
EOF
)
    if [ $? -eq 0 ]; then ok "$name"; else nok "$name" "$expr: $out"; fi
}

# plots need gnuplot (Debian: gnuplot-nox)
sh "$ROOT/tools/deps.sh" gnuplot-nox >/dev/null 2>&1 || true

# ---------------------------------------------------------------- inputs
python3 - <<'EOF'
import struct, json

def st(path, tensors):
    """tensors: list of (name, dtype, shape, bytes)"""
    hdr = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, dt, shape, data in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors))

N = 4096                                  # values per tensor
zeros = bytes(2 * N)
st("zero.safetensors", [("h.0.mlp.c_fc.weight", "BF16", [64, 64], zeros)])

# a single flipped bit: value 100, bit 9 (byte 1, bit 1) of the same tensor
one = bytearray(zeros); one[2 * 100 + 1] ^= 0x02
st("zero_flip.safetensors", [("h.0.mlp.c_fc.weight", "BF16", [64, 64], bytes(one))])

# bf16 1.0 = 0x3F80 everywhere: ones at bits 7..13 only
st("ones.safetensors", [("h.0.attn.c_attn.weight", "BF16", [64, 64], struct.pack("<H", 0x3F80) * N)])

# two equiprobable low bytes (0x00, 0xFF), high byte constant 0x3F:
# entropy 1 bit/byte in byte group 0, 0 in group 1
two = b"".join(struct.pack("<H", 0x3F00 | (0xFF if i % 2 else 0x00)) for i in range(N))
st("two.safetensors", [("wte.weight", "BF16", [64, 64], two)])

# four equiprobable bytes in a u8 tensor -> 2 bits/byte; f32 tensor of 1.0 (0x3F800000)
four = bytes([i % 4 for i in range(N)])
st("mixed.safetensors", [("a.u8", "U8", [N], four),
                         ("h.1.ln_1.weight", "F32", [N], struct.pack("<f", 1.0) * N)])

# every class in one file
def t(name):
    return (name, "BF16", [16], struct.pack("<H", 0x3F80) * 16)
st("classes.safetensors", [t("wte.weight"), t("h.0.attn.c_attn.weight"), t("h.0.mlp.c_fc.weight"),
                           t("h.0.ln_1.weight"), t("lm_head.weight"), t("h.0.attn.c_attn.weight.exp_avg"),
                           t("something.else")])

# a tiny trajectory: 3 steps, two files each; one value changes per step
import os
for s, k in ((100, 0), (200, 1), (300, 2)):
    os.makedirs("traj/step-%06d" % s, exist_ok=True)
    w = bytearray(struct.pack("<H", 0x3F80) * N)
    for j in range(k):
        w[2 * j] ^= 0x01
    st("traj/step-%06d/model.safetensors" % s, [("h.0.attn.c_attn.weight", "BF16", [64, 64], bytes(w))])
    m = bytearray(struct.pack("<f", 0.5) * N)
    m[0] = k
    st("traj/step-%06d/optim.safetensors" % s, [("h.0.attn.c_attn.weight.exp_avg", "F32", [N], bytes(m))])

open("notst.bin", "wb").write(bytes([0x00, 0xFF]) * 4096)
EOF

# ---------------------------------------------------------------- exact answers
"$LMC" analyze --json --ref zero.safetensors zero.safetensors > z.json
check "all-zero vs itself: exit 0, JSON" test -s z.json
pycheck "all-zero: dtype bf16, 16 bits, width 2" z.json 'dt["dtype"] == "bf16" and dt["width"] == 2 and len(dt["ones"]) == 16 and len(dt["flips"]) == 16'
pycheck "all-zero: ones 0 at every bit" z.json 'dt["ones"] == [0.0] * 16 and ten["h.0.mlp.c_fc.weight"]["ones"] == [0.0] * 16'
pycheck "all-zero: entropy 0 in every byte group" z.json 'dt["entropy"] == [0.0, 0.0] and dt["xor_entropy"] == [0.0, 0.0]'
pycheck "all-zero: unchanged 1.0 vs itself, flips 0" z.json 'dt["unchanged"] == 1.0 and dt["flips"] == [0.0] * 16 and dt["compared_values"] == 4096'
pycheck "all-zero: floor 0, ideal ratio null (infinite)" z.json 'dt["floor_bytes"] == 0 and dt["ideal_ratio"] is None'
pycheck "all-zero: tensor matched, class mlp" z.json 'ten["h.0.mlp.c_fc.weight"]["matched"] is True and ten["h.0.mlp.c_fc.weight"]["class"] == "mlp"'
pycheck "all-zero: lmc bytes > 0, file ratio > 1" z.json 'f["lmc_bytes"] > 0 and f["lmc_ratio"] > 1 and dt["lmc_bytes"] > 0'

"$LMC" analyze --json --ref zero.safetensors zero_flip.safetensors > flip.json
pycheck "one flipped bit: flip rate 1/n at bit 9" flip.json 'dt["flips"][9] == 1 / 4096'
pycheck "one flipped bit: 0 at every other bit" flip.json 'all(dt["flips"][b] == 0 for b in range(16) if b != 9)'
pycheck "one flipped bit: unchanged (n-1)/n" flip.json 'dt["unchanged"] == 4095 / 4096'
pycheck "one flipped bit: ones 1/n at bit 9 of the new file" flip.json 'dt["ones"][9] == 1 / 4096 and sum(dt["ones"]) == 1 / 4096'
pycheck "one flipped bit: bit labels (bf16)" flip.json 'dt["bit_labels"][15] == "sign" and dt["bit_labels"][14] == "exp7" and dt["bit_labels"][7] == "exp0" and dt["bit_labels"][6] == "man6" and dt["bit_labels"][0] == "man0"'

"$LMC" analyze --json ones.safetensors > ones.json
pycheck "bf16 1.0: ones 1.0 at bits 7..13, 0 elsewhere" ones.json 'dt["ones"] == [1.0 if 7 <= b <= 13 else 0.0 for b in range(16)]'
pycheck "no reference: flips, unchanged, xor_entropy null" ones.json 'dt["flips"] is None and dt["unchanged"] is None and dt["xor_entropy"] is None and f["ref"] is None'
pycheck "bf16 1.0: constant bytes, entropy 0" ones.json 'dt["entropy"] == [0.0, 0.0]'
pycheck "bf16 1.0: class attention" ones.json 'list(cls) == ["attention"]'

"$LMC" analyze --json two.safetensors > two.json
pycheck "two equiprobable bytes: 1 bit/byte in group 0, 0 in group 1" two.json 'abs(dt["entropy"][0] - 1.0) < 1e-12 and dt["entropy"][1] == 0.0'
pycheck "two equiprobable bytes: tensor floor = n/8 bytes, ideal ratio 16" two.json 'abs(ten["wte.weight"]["floor_bytes"] - 512) < 1e-9 and abs(ten["wte.weight"]["ideal_ratio"] - 16) < 1e-9'
pycheck "two equiprobable bytes: ones 0.5 at bits 0..7, pattern 0x3F at 8..15" two.json 'dt["ones"][:8] == [0.5] * 8 and dt["ones"][8:] == [1.0] * 6 + [0.0, 0.0]'
pycheck "class embedding (wte)" two.json 'list(cls) == ["embedding"]'

"$LMC" analyze --json mixed.safetensors > mixed.json
pycheck "two dtypes: u8 and f32 figures per dtype" mixed.json 'sorted(x["dtype"] for x in f["dtypes"]) == ["f32", "u8"]'
pycheck "u8 four equiprobable bytes: 2 bits/byte" mixed.json '[abs(x["entropy"][0] - 2.0) < 1e-12 for x in f["dtypes"] if x["dtype"] == "u8"] == [True]'
pycheck "f32 1.0: ones at bits 23..29 only, 4 byte groups, labels" mixed.json '[(x["ones"] == [1.0 if 23 <= b <= 29 else 0.0 for b in range(32)], len(x["entropy"]), x["bit_labels"][31], x["bit_labels"][23], x["bit_labels"][22]) for x in f["dtypes"] if x["dtype"] == "f32"] == [(True, 4, "sign", "exp0", "man22")]'
pycheck "f32 norm tensor classed as norm" mixed.json '[x["classes"][0]["class"] for x in f["dtypes"] if x["dtype"] == "f32"] == ["norm"]'

# whole-file floor: agrees with the quantity bench/floor.c computes (header as width-1 bytes)
pycheck "whole-file floor = header entropy + tensor floors" mixed.json 'f["floor_bytes"] >= sum(x["floor_bytes"] for x in f["dtypes"]) and f["floor_bytes"] - sum(x["floor_bytes"] for x in f["dtypes"]) <= f["header_bytes"]'

"$LMC" analyze --json classes.safetensors > classes.json
pycheck "class rules: every class" classes.json '{t["name"]: t["class"] for t in dt["tensors"]} == {"wte.weight": "embedding", "h.0.attn.c_attn.weight": "attention", "h.0.mlp.c_fc.weight": "mlp", "h.0.ln_1.weight": "norm", "lm_head.weight": "head", "h.0.attn.c_attn.weight.exp_avg": "optimizer", "something.else": "other"}'

"$LMC" analyze --json notst.bin > notst.json
pycheck "not safetensors: analysed as u8 bytes, noted" notst.json 'f["container"] == "bytes" and "u8" in f["note"] and dt["dtype"] == "u8" and abs(dt["entropy"][0] - 1.0) < 1e-12'

# lmc figures are what `lmc` itself produces
"$LMC" -T1 -c -r zero.safetensors zero_flip.safetensors > zf.lmc 2>/dev/null
pycheck "whole-file lmc bytes = size of lmc -r output" flip.json "f['lmc_bytes'] == $(stat -c %s zf.lmc)"

# a tensor larger than the 4 MiB read window (streamed in pieces): per-tensor
# lmc bytes = `lmc --dtype=bf16` on the raw tensor bytes, here as a delta
python3 - <<'EOF'
import os, struct, json
n = 5 << 19                               # 2.5 Mi values, 5 MiB
lo = os.urandom(n)
hi = bytes((0x3c, 0x3d, 0xbc, 0xbd)[b & 3] for b in os.urandom(n))
data = bytearray(n * 2); data[0::2] = lo; data[1::2] = hi
d2 = bytearray(data); d2[0::7] = bytes(b ^ 1 for b in d2[0::7])
h = json.dumps({"big.weight": {"dtype": "BF16", "shape": [n], "data_offsets": [0, 2 * n]}}).encode()
h += b" " * ((8 - len(h) % 8) % 8)
for name, x in (("big", data), ("big2", d2)):
    open(name + ".safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(x))
    open(name + ".raw", "wb").write(bytes(x))
EOF
"$LMC" analyze --json -r big.safetensors big2.safetensors > big.json
"$LMC" -T1 -c --dtype=bf16 -r big.raw big2.raw > big2.lmc
pycheck "tensor > 4 MiB: per-tensor lmc bytes = lmc --dtype=bf16 -r on the raw bytes" big.json "dt['lmc_bytes'] == $(stat -c %s big2.lmc) and dt['values'] == 5 << 19"
rm -f big.raw big2.raw big.safetensors big2.safetensors big2.lmc

# ---------------------------------------------------------------- difference tokens (REFCTX)
# Reference-conditioned tokens: t = mono(c) - mono(r) (negated for r < 0),
# token 0 or 2k-1+(t<0) with k = bit length of |t| and k-1 raw bits, context
# bits W-9..W-2 of r, entropies per 64 Ki-value block.
python3 - <<'EOF'
import struct, json

def st(path, tensors):
    hdr = {}
    off = 0
    for name, dt, data in tensors:
        w = {"BF16": 2, "F16": 2, "F32": 4, "U8": 1, "I16": 2}[dt]
        hdr[name] = {"dtype": dt, "shape": [len(data) // w], "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(t[2] for t in tensors))

def h16(v): return b"".join(struct.pack("<H", x) for x in v)
def h32(v): return b"".join(struct.pack("<I", x) for x in v)

N = 4096
# plus1: one exponent (bf16 1.0 .. 1.49), every delta +1: token 1, no raw bits
ref_a = [0x3F80 + (i % 64) for i in range(N)]
# signs: references of both signs in one context (the sign is not part of
# it); pattern + 1 (|value| grew: t = +1, token 1) for half the values, the
# others unchanged (token 0, whatever the sign): H = 1 bit with or without
# the context
ref_n = [(0x3F80 if i % 2 == 0 else 0xBF80) + (i % 64) for i in range(N)]
cur_n = [r + 1 if i % 4 < 2 else r for i, r in enumerate(ref_n)]
# twoexp: exponents 127 (delta +1, token 1) and 126 (delta -1, token 2),
# which differ in their lowest bit only, alternate: H(token) = 1 bit,
# H(token | exponent) = 0
ref_2 = [0x3F80 + (i % 64) if i % 2 == 0 else 0x3F00 + (i % 64) for i in range(N)]
cur_2 = [r + 1 if i % 2 == 0 else r - 1 for i, r in enumerate(ref_2)]
ref_2f = [0x3F800000 + i if i % 2 == 0 else 0x3F000000 + i for i in range(N)]
cur_2f = [r + 1 if i % 2 == 0 else r - 1 for i, r in enumerate(ref_2f)]
# plus5: |t| = 4 or 5, alternating: one token (k = 3), 2 raw bits per value
ref_5 = [0x3F80 + (i % 32) for i in range(N)]
cur_5 = [r + (5 if i % 2 else 4) for i, r in enumerate(ref_5)]
st("rc_ref.safetensors", [("a.plus1", "BF16", h16(ref_a)), ("b.signs", "BF16", h16(ref_n)),
                          ("c.twoexp", "BF16", h16(ref_2)), ("d.plus5", "BF16", h16(ref_5)),
                          ("e.inf", "BF16", h16([0x7F80] * N)), ("f.bytes", "U8", bytes(N)),
                          ("f.int16", "I16", h16([0x3F80] * N)),
                          ("g.f16", "F16", h16([0x3C00 if i % 2 == 0 else 0x3C80 for i in range(N)])),
                          ("h.f32", "F32", h32([0x3F800000 + i for i in range(N)])),
                          ("h.f32twoexp", "F32", h32(ref_2f)),
                          ("i.f32inf", "F32", h32([0x7F800000] * N)),
                          ("j.f32neg", "F32", h32([0xBF800000] * N))])
st("rc_cur.safetensors", [("a.plus1", "BF16", h16([r + 1 for r in ref_a])), ("b.signs", "BF16", h16(cur_n)),
                          ("c.twoexp", "BF16", h16(cur_2)), ("d.plus5", "BF16", h16(cur_5)),
                          # +inf -> -inf: |t| = 0xFF01, k = 16, token 32, 15 raw bits
                          ("e.inf", "BF16", h16([0xFF80] * N)), ("f.bytes", "U8", bytes(range(256)) * (N // 256)),
                          ("f.int16", "I16", h16([0x3F81] * N)),
                          # f16 context = bits 7..14: the exponent and 3 high mantissa bits
                          ("g.f16", "F16", h16([0x3C01 if i % 2 == 0 else 0x3C7F for i in range(N)])),
                          ("h.f32", "F32", h32([0x3F800000 + i + 0x10000 for i in range(N)])),
                          ("h.f32twoexp", "F32", h32(cur_2f)),
                          ("i.f32inf", "F32", h32([0xFF800000] * N)),
                          ("j.f32neg", "F32", h32([0x3F800000] * N)),
                          ("k.unmatched", "BF16", h16([0x3F80] * N))])

# blocks of 64 Ki values, across read windows: 40 blocks (5 MiB of bf16),
# token 1 in even blocks and token 2 in odd ones. Every block has one token,
# so the entropy is 0; cut anywhere else, it would not be.
B = 65536
st("rc_blk_ref.safetensors", [("blk", "BF16", struct.pack("<H", 0x3F80) * B * 40)])
st("rc_blk_cur.safetensors", [("blk", "BF16", (struct.pack("<H", 0x3F81) * B + struct.pack("<H", 0x3F7F) * B) * 20)])
EOF
"$LMC" analyze --json -r rc_ref.safetensors rc_cur.safetensors > rc.json
rcten() { # rcten CHECK-NAME TENSOR EXPR: EXPR on t = the tensor (any dtype)
    pycheck "$1" rc.json "(lambda t: $3)({x['name']: x for y in f['dtypes'] for x in y['tensors']}['$2'])"
}
rcten "tokens: bf16 deltas +1 in one exponent: tok and ctx entropy 0, no raw bits" a.plus1 \
    't["ctx_values"] == 4096 and t["tok_entropy"] == 0 and t["ctx_entropy"] == 0 and t["tok_raw_bits"] == 0 and t["ctx_floor_bytes"] == 0 and t["tok_floor_bytes"] == 0'
rcten "tokens: +1: XOR floor > 0, gains 1, xor_value_entropy = sum of xor_entropy" a.plus1 \
    't["xor_value_entropy"] > 0 and t["ctx_gain"] == 1 and t["tok_gain"] == 1 and abs(t["xor_value_entropy"] - sum(t["xor_entropy"])) < 1e-12 and abs(t["xor_value_floor_bytes"] - t["floor_bytes"]) < 1e-9'
rcten "tokens: both signs, |value| grew or unchanged: tokens 1 and 0, 1 bit" b.signs 'abs(t["tok_entropy"] - 1) < 1e-12 and abs(t["ctx_entropy"] - 1) < 1e-12 and t["tok_raw_bits"] == 0'
rcten "tokens: two exponents, two constant tokens: H(tok) = 1, H(tok | ctx) = 0" c.twoexp \
    'abs(t["tok_entropy"] - 1) < 1e-12 and t["ctx_entropy"] == 0 and t["tok_raw_bits"] == 0 and abs(t["tok_floor_bytes"] - 512) < 1e-9 and t["ctx_floor_bytes"] == 0'
rcten "tokens: |t| = 4 or 5: one token, 2 raw bits per value" d.plus5 \
    't["tok_raw_bits"] == 2 and t["tok_entropy"] == 2 and t["ctx_entropy"] == 2 and t["ctx_floor_bytes"] == 1024'
rcten "tokens: bf16 +inf -> -inf: the largest token, 15 raw bits" e.inf 't["tok_raw_bits"] == 15 and t["tok_entropy"] == 15 and t["ctx_entropy"] == 15'
rcten "tokens: none for u8" f.bytes 't["ctx_values"] == 0 and t["tok_entropy"] is None and t["ctx_entropy"] is None and t["ctx_gain"] is None and t["xor_entropy"] is not None'
rcten "tokens: none for i16 (2 bytes, not a float)" f.int16 't["ctx_values"] == 0 and t["tok_entropy"] is None and t["xor_entropy"] is not None'
rcten "tokens: f16 context = bits 7..14 (exponent + 3 mantissa bits)" g.f16 \
    'abs(t["tok_entropy"] - 1) < 1e-12 and t["ctx_entropy"] == 0 and t["ctx_bytes"] == 8192'
rcten "tokens: f32 |t| = 2^16: 16 raw bits" h.f32 't["ctx_values"] == 4096 and t["tok_raw_bits"] == 16 and t["tok_entropy"] == 16 and t["ctx_entropy"] == 16 and t["ctx_bytes"] == 16384'
rcten "tokens: f32, two exponents, two constant tokens: H(tok) = 1, H(tok | ctx) = 0" h.f32twoexp \
    'abs(t["tok_entropy"] - 1) < 1e-12 and t["ctx_entropy"] == 0 and t["tok_raw_bits"] == 0'
rcten "tokens: f32 +inf -> -inf: |t| = 0xFF000001 >= 2^31, 31 raw bits" i.f32inf 't["tok_raw_bits"] == 31 and t["tok_entropy"] == 31'
rcten "tokens: f32 -1.0 -> 1.0: |t| = 0x7F000001, 30 raw bits" j.f32neg 't["tok_raw_bits"] == 30 and t["tok_entropy"] == 30'
rcten "tokens: none for an unmatched tensor" k.unmatched 't["ctx_values"] == 0 and t["ctx_entropy"] is None'
pycheck "tokens: dtype and file sums cover matched bf16/f16/f32 only" rc.json \
    '[(x["dtype"], x["ctx_values"]) for x in f["dtypes"]] == [("bf16", 5 * 4096), ("u8", 0), ("i16", 0), ("f16", 4096), ("f32", 4 * 4096)] and f["ctx_values"] == 10 * 4096 and f["ctx_bytes"] == 4096 * (2 * 6 + 4 * 4)'
pycheck "tokens: file raw bits and floors are the sums over tensors" rc.json \
    'abs(f["ctx_floor_bytes"] - (512 + 1024 + (15 + 16 + 31 + 30) * 512)) < 1e-6 and abs(f["tok_floor_bytes"] - f["ctx_floor_bytes"] - 3 * 512) < 1e-6 and abs(f["tok_raw_bits"] * f["ctx_values"] - 8 * (1024 + (15 + 16 + 31 + 30) * 512)) < 1e-6'
pycheck "tokens: class sums (XOR floor over the same values)" rc.json \
    'abs(cls["other"]["xor_value_floor_bytes"] - sum(t["floor_bytes"] for t in dt["tensors"] if t["ctx_values"])) < 1e-6 and cls["other"]["ctx_values"] == 5 * 4096'
"$LMC" analyze --json -r rc_blk_ref.safetensors rc_blk_cur.safetensors > rcblk.json
pycheck "tokens: entropy per 64 Ki-value block, across 4 MiB read windows" rcblk.json \
    'dt["ctx_values"] == 40 * 65536 and dt["tok_entropy"] == 0 and dt["ctx_entropy"] == 0 and dt["xor_value_entropy"] == 0 and f["ctx_floor_bytes"] == 0'
rm -f rc_blk_ref.safetensors rc_blk_cur.safetensors
"$LMC" analyze --json rc_cur.safetensors > rcnoref.json
pycheck "tokens: no reference: ctx_values 0, figures null" rcnoref.json \
    'f["ctx_values"] == 0 and f["ctx_entropy"] is None and all(x["ctx_values"] == 0 and x["tok_entropy"] is None and x["xor_value_floor_bytes"] is None for x in f["dtypes"])'
"$LMC" analyze --csv -r rc_ref.safetensors rc_cur.safetensors > rc.csv
check "tokens: csv: tensor ctx_entropy row" grep -q ",bf16,tensor,c.twoexp,other,ctx_entropy,,0$" rc.csv
check "tokens: csv: tensor tok_entropy row" grep -q ",bf16,tensor,c.twoexp,other,tok_entropy,,1$" rc.csv
check "tokens: csv: file ctx_values row" grep -q ",,file,rc_cur.safetensors,,ctx_values,,40960$" rc.csv
check "tokens: csv: no token rows for u8" bash -c '! grep -Eq ",u8,[a-z]+,[^,]*,[^,]*,(ctx|tok)_" rc.csv'
"$LMC" analyze --tensors -r rc_ref.safetensors rc_cur.safetensors > rc.txt
check "tokens: table: xor/v tok/v ctx/v columns and the file line" bash -c 'grep -q "xor/v tok/v ctx/v" rc.txt && grep -q "difference tokens (40960 matched" rc.txt && grep -Eq "^    c.twoexp .* 1.00  0.00 " rc.txt'
"$LMC" analyze rc_cur.safetensors > rcnoref.txt
check "tokens: table: no token columns without a reference" bash -c '! grep -q "ctx/v" rcnoref.txt && ! grep -q "difference tokens" rcnoref.txt'

# ---------------------------------------------------------------- formats
"$LMC" analyze --ref zero.safetensors zero_flip.safetensors > table.txt
check "table: exit 0" test -s table.txt
check "table: whole-file line" grep -q "whole file: ideal" table.txt
check "table: flip rate table" grep -q "flip rate per bit" table.txt
"$LMC" analyze classes.safetensors > classes.txt
ok_all=1
for c in embedding attention mlp norm optimizer head other; do grep -q "^    $c " classes.txt || ok_all=0; done
check "table: a row per class (embedding attention mlp norm optimizer head other)" test $ok_all = 1
"$LMC" analyze --brief classes.safetensors > brief.txt
check "table: --brief drops the bit tables" bash -c '! grep -q "per bit" brief.txt && grep -q "^    all " brief.txt'
"$LMC" analyze --tensors classes.safetensors > tens.txt
check "table: --tensors lists tensors" grep -q "lm_head.weight" tens.txt

"$LMC" analyze --csv --ref zero.safetensors zero_flip.safetensors > flip.csv
check "csv: header" test "$(head -1 flip.csv)" = "step,checkpoint,file,ref,dtype,scope,name,class,metric,index,value"
check "csv: flip at bit 9 = 1/4096" grep -q ",dtype,,,flips,9,0.000244140625$" flip.csv
check "csv: tensor rows" grep -q ",tensor,h.0.mlp.c_fc.weight,mlp,ones,0,0$" flip.csv
check "csv: every row has 11 fields" python3 -c "import csv,sys; rows=list(csv.reader(open('flip.csv'))); sys.exit(0 if all(len(r)==11 for r in rows) and len(rows)>50 else 1)"
"$LMC" analyze -q --json=out.json --csv=out.csv ones.safetensors > quiet.txt
check "--json=FILE --csv=FILE -q: files written, nothing on stdout" bash -c 'test -s out.json && test -s out.csv && ! test -s quiet.txt'
check "--json and --csv both on stdout refused" bash -c '! "$0" analyze --json --csv ones.safetensors >/dev/null 2>&1' "$LMC"
check "missing file: exit 1" bash -c '! "$0" analyze nonexistent.safetensors >/dev/null 2>&1' "$LMC"
check "--help documents the options" bash -c '"$0" analyze --help | grep -q -- "--plot DIR" && "$0" analyze --help | grep -q -- "--json" && "$0" analyze --help | grep -q "optimizer"' "$LMC"
# (detect_leaks=0: under ASan, lmc's own --help path returns without freeing its file list)
check "lmc --help mentions lmc analyze" bash -c 'ASAN_OPTIONS=detect_leaks=0 "$0" --help | grep -q "lmc analyze"' "$LMC"

# ---------------------------------------------------------------- trajectory
"$LMC" analyze --json traj > traj.json
pycheck "trajectory: 3 checkpoints in step order" traj.json '[c["step"] for c in d["checkpoints"]] == [100, 200, 300]'
pycheck "trajectory: first step has no reference, later ones do" traj.json '[[x["ref"] is None for x in c["files"]] for c in d["checkpoints"]] == [[True, True], [False, False], [False, False]]'
pycheck "trajectory: model flips 1/n at bit 0 for step 200" traj.json '[x for x in d["checkpoints"][1]["files"] if x["key"] == "model.safetensors"][0]["dtypes"][0]["flips"][0] == 1 / 4096'
pycheck "trajectory: model step 300 (2 changed vs 1): 1 value differs" traj.json '[x for x in d["checkpoints"][2]["files"] if x["key"] == "model.safetensors"][0]["dtypes"][0]["unchanged"] == 4095 / 4096'
pycheck "trajectory: optim file classed optimizer" traj.json '[x for x in d["checkpoints"][2]["files"] if x["key"] == "optim.safetensors"][0]["dtypes"][0]["classes"][0]["class"] == "optimizer"'
pycheck "trajectory: delta ratio per step and class" traj.json 'sorted({(t["step"], t["file"], t["class"]) for t in d["trajectory"]}) == sorted({(s, k, c) for s in (200, 300) for k, c in (("model.safetensors", "all"), ("model.safetensors", "attention"), ("optim.safetensors", "all"), ("optim.safetensors", "optimizer"))}) and all(t["lmc_ratio"] > 1 for t in d["trajectory"])'
pycheck "trajectory: tokens per step (one value of 4096 +1, one context)" traj.json '[abs(x["dtypes"][0]["tok_entropy"] - (4096 * math.log2(4096) - 4095 * math.log2(4095)) / 4096) < 1e-12 and x["dtypes"][0]["ctx_entropy"] == x["dtypes"][0]["tok_entropy"] for x in d["checkpoints"][1]["files"] + d["checkpoints"][2]["files"]] == [True] * 4 and [x["ctx_values"] for x in d["checkpoints"][0]["files"]] == [0, 0]'
"$LMC" analyze traj > traj.txt
check "trajectory: table over time" grep -q "compressibility over time: model.safetensors" traj.txt
"$LMC" analyze --json traj/step-000100 traj/step-000200 > pair.json
pycheck "two checkpoint folders as arguments: second against first" pair.json 'len(d["checkpoints"]) == 2 and all(x["ref"] for x in d["checkpoints"][1]["files"])'
mkdir flat && cp traj/step-000100/model.safetensors flat/ckpt-100.safetensors && cp traj/step-000200/model.safetensors flat/ckpt-200.safetensors
"$LMC" analyze --json flat > flat.json
pycheck "folder of numbered files: a trajectory" flat.json '[c["step"] for c in d["checkpoints"]] == [100, 200] and d["checkpoints"][1]["files"][0]["ref"].endswith("ckpt-100.safetensors")'

# ---------------------------------------------------------------- torch.save archives
# tests/data/torch/step3.pt and step2.pt (gen.py: a 32->64->32 MLP and its
# Adam state, two consecutive steps): 16 float32 storages, all present in both
TZ="$ROOT/tests/data/torch"
"$LMC" analyze --json --ref "$TZ/step2.pt" "$TZ/step3.pt" > tz.json
check "torch.save delta: exit 0, JSON" test -s tz.json
pycheck "torch.save: container, 16 storages, all matched" tz.json 'f["container"] == "torch.save" and f["tensors"] == 16 and f["tensors_matched"] == 16 and f["note"] is None'
pycheck "torch.save: one dtype, f32, 4 byte groups" tz.json 'len(f["dtypes"]) == 1 and dt["dtype"] == "f32" and dt["width"] == 4 and len(dt["ones"]) == 32'
pycheck "torch.save: storages named data/<key>, flips measured" tz.json 'sorted(ten) == sorted("data/%d" % k for k in range(16)) and dt["flips"] is not None and dt["compared_values"] == 12580'
pycheck "torch.save: labels from the dicts, classes from them" tz.json 'ten["data/0"]["label"] == "0.weight" and ten["data/5"]["label"] == "exp_avg" and ten["data/5"]["class"] == "optimizer" and ten["data/4"]["label"] == "step"'
"$LMC" analyze "$TZ/step3.pt" > tz.txt
check "torch.save: the text report names the container" grep -q "torch.save zip, 54353 bytes" tz.txt
# torch.save archives one after another (torch's distributed checkpoints):
# read as the encoder reads them, archive k against the reference's archive k
cat "$TZ/step3.pt" "$TZ/step3.pt" > cat3.pt
cat "$TZ/step2.pt" "$TZ/step2.pt" > cat2.pt
"$LMC" analyze --json --ref cat2.pt cat3.pt > cat.json
pycheck "two torch.save archives: 32 storages a<k>/data/<key>, all matched" cat.json 'f["container"] == "torch.save" and f["tensors"] == 32 and f["tensors_matched"] == 32 and sorted(ten) == sorted("a%d/data/%d" % (a, k) for a in range(2) for k in range(16))'
pycheck "two torch.save archives: twice the values of one compared" cat.json 'dt["compared_values"] == 2 * 12580 and ten["a1/data/5"]["label"] == "exp_avg"'
head -c 54353 /dev/urandom > notzip.bin
"$LMC" analyze --json notzip.bin > nz.json
pycheck "neither container: analysed as bytes" nz.json 'f["container"] == "bytes" and "analysed as bytes" in f["note"] and dt["dtype"] == "u8"'

# ---------------------------------------------------------------- plots
if command -v gnuplot >/dev/null 2>&1; then
    "$LMC" analyze -q --plot plots traj
    check "--plot: exit 0" test $? -eq 0
    png_ok() { [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; }
    for p in bits-model-bf16 flips-model-bf16 ratio-model time-model time-files bits-optim-f32; do
        check "--plot: $p.png is a PNG" png_ok "plots/$p.png"
    done
    check "--plot: baselines (zstd, bzip2) measured" bash -c '"$0" analyze --json --baselines traj/step-000100/model.safetensors | python3 -c "import json,sys; f=json.load(sys.stdin)[\"checkpoints\"][0][\"files\"][0]; sys.exit(0 if f[\"zstd_bytes\"] > 0 and f[\"bzip2_bytes\"] > 0 else 1)"' "$LMC"
else
    nok "--plot: gnuplot is not installed (sh tools/deps.sh gnuplot-nox)"
fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
