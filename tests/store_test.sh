#!/usr/bin/env bash
# store_test.sh LMC - tests of `lmc store` (doc/store.md) and of sharded directories.
# Prints "ok - ..." / "not ok - ..." per check and one final line "N passed, M failed".
set -u
LMC=${1:-./lmc}
case $LMC in /*) ;; *) LMC=$PWD/$LMC ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRAJ=$ROOT/data/trajectory
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { echo "ok - $1"; pass=$((pass + 1)); }
bad() { echo "not ok - $1"; fail=$((fail + 1)); }
check() { local d=$1; shift; if "$@" >"$T/last.out" 2>&1; then ok "$d"; else bad "$d"; sed 's/^/#   /' "$T/last.out" | head -20; fi; }
check_fails() { local d=$1; shift; if "$@" >"$T/last.out" 2>&1; then bad "$d (succeeded)"; else ok "$d"; fi; }

S=$T/store
STEPS=$(cd "$TRAJ" && ls -d step-* | sed 's/step-0*//')

# --- trajectory: 6 steps x 3 files -----------------------------------------
check "init" "$LMC" store init "$S"
check_fails "init twice refused" "$LMC" store init "$S"
all_ok=1
for s in $STEPS; do
    d=$(printf '%s/step-%06d' "$TRAJ" "$s")
    "$LMC" store add "$S" "$d" --step "$s" -q || all_ok=0
done
[ $all_ok = 1 ] && ok "add 6 trajectory steps (directories of 3 files)" || bad "add 6 trajectory steps"
check_fails "add an existing step refused" "$LMC" store add "$S" "$TRAJ/step-000550" --step 550 -q
check "verify" "$LMC" store verify "$S"
# a thread count the coders do not take is a usage error before any work
# (up to 1024 were accepted, and every add failed at the coder)
out=$("$LMC" store verify "$S" -T 257 2>&1); rc=$?
check "-T 257: usage error naming the range" eval '[ $rc -eq 1 ] && echo "$out" | grep -q "thread count out of range (0: every core, or 1 to 256): 257"'
check "-T 256: verify" "$LMC" store verify "$S" -T 256 -q
restore_all() {  # store, list of steps -> compares with the trajectory
    local st=$1; shift; local s d ok_=1
    for s in "$@"; do
        d=$(printf '%s/step-%06d' "$TRAJ" "$s")
        rm -rf "$T/r"; "$LMC" store restore "$st" "$s" -o "$T/r" -q || { echo "restore $s failed"; ok_=0; continue; }
        for f in "$d"/*.safetensors; do cmp "$f" "$T/r/$(basename "$f")" || ok_=0; done
    done
    [ $ok_ = 1 ]
}
check "restore every step byte-identical" restore_all "$S" $STEPS
"$LMC" store restore "$S" 300 --name optim.safetensors -o "$T/one.st" -q && cmp "$T/one.st" "$TRAJ/step-000300/optim.safetensors" \
    && ok "restore one named file" || bad "restore one named file"
check_fails "restore a missing step fails" "$LMC" store restore "$S" 12345 -o "$T/none" -q

# ratios through the store equal lmc -r on the same pairs
ratio_ok=1
"$LMC" store ls "$S" >"$T/ls.txt"
prev=""
for s in $STEPS; do
    d=$(printf '%s/step-%06d' "$TRAJ" "$s")
    for f in model_bf16 model_fp32 optim; do
        if [ -z "$prev" ]; then n=$("$LMC" -c "$d/$f.safetensors" | wc -c)
        else n=$("$LMC" -c -r "$prev/$f.safetensors" "$d/$f.safetensors" | wc -c); fi
        got=$(awk -v s="$s" -v f="$f.safetensors" '$1==s && $2==f {print $4}' "$T/ls.txt")
        [ "$n" = "$got" ] || { echo "# step $s $f: lmc -r $n, store $got"; ratio_ok=0; }
    done
    prev=$d
done
[ $ratio_ok = 1 ] && ok "store frame sizes equal lmc / lmc -r sizes (18 pairs)" || bad "store sizes differ from lmc -r"

# --- 20-step chain with --keyframe-every 5 ---------------------------------
SYN=$T/syn; mkdir -p "$SYN"
python3 - "$TRAJ/step-000300/model_bf16.safetensors" "$SYN" <<'PY'
import sys, random, struct
src, out = sys.argv[1], sys.argv[2]
b = bytearray(open(src, 'rb').read())
hl = struct.unpack('<Q', b[:8])[0]; start = 8 + hl
rnd = random.Random(7)
for k in range(20):
    for _ in range(2000):
        i = rnd.randrange(start, len(b)); b[i] ^= 1 << rnd.randrange(8)
    open('%s/s%02d.safetensors' % (out, k), 'wb').write(b)
PY
S2=$T/store2
"$LMC" store init "$S2" -q
all_ok=1
for k in $(seq 0 19); do "$LMC" store add "$S2" "$SYN/s$(printf %02d $k).safetensors" --name w.safetensors --keyframe-every 5 -q || all_ok=0; done
[ $all_ok = 1 ] && ok "add 20 synthetic steps, --keyframe-every 5" || bad "add 20 synthetic steps"
"$LMC" store ls "$S2" >"$T/ls2.txt"
maxd=$(awk '($6=="keyframe"||$6=="delta") && $7>m {m=$7} END {print m+0}' "$T/ls2.txt")
nk=$(grep -c keyframe "$T/ls2.txt")
[ "$maxd" -le 4 ] && [ "$nk" = 4 ] && ok "ls: max chain depth $maxd <= 4, 4 keyframes" || bad "ls: depth $maxd, keyframes $nk"
restore_syn() {  # store lim [cached] -> every step restored and compared; max frames decoded
    # <= lim; cached=1: the last step must come from the cache (no frame decoded)
    local st=$1 lim=$2 cached=${3:-0} k out frames maxf=0 ok_=1 last
    last=$("$LMC" store ls "$st" | awk '$6=="keyframe"||$6=="delta" {s=$1} END {print s}')
    while read -r k; do
        out=$("$LMC" store restore "$st" "$k" -o "$T/syn.out" -v) || { ok_=0; continue; }
        if echo "$out" | grep -q "from the cache"; then
            [ "$k" = "$last" ] || { echo "step $k (not the last) from the cache"; ok_=0; }
        elif [ "$k" = "$last" ] && [ "$cached" = 1 ]; then
            echo "step $k not from the cache: $out"; ok_=0
        else
            frames=$(echo "$out" | sed -n 's/.*bytes, \([0-9]*\) frame.*/\1/p')
            [ "${frames:-99}" -gt "$maxf" ] && maxf=${frames:-99}
        fi
        cmp -s "$T/syn.out" "$SYN/s$(printf %02d "$k").safetensors" || { echo "step $k differs"; ok_=0; }
    done < <("$LMC" store ls "$st" | awk '$6=="keyframe"||$6=="delta" {print $1}')
    echo "max frames decoded: $maxf"
    [ $ok_ = 1 ] && [ "$maxf" -le "$lim" ] && [ "$maxf" -ge 1 ]
}
check "restore all 20, each decodes <= 5 frames (the last: from the cache)" restore_syn "$S2" 5 1

# rm in the middle of a delta run, at a keyframe, and at the head
check "rm step 7 (a delta)" "$LMC" store rm "$S2" 7 -q
check "rm step 10 (a keyframe)" "$LMC" store rm "$S2" 10 -q
check "rm step 19 (the head)" "$LMC" store rm "$S2" 19 -q
check_fails "rm a missing step fails" "$LMC" store rm "$S2" 7 -q
check "verify after rm" "$LMC" store verify "$S2"
check "restore all after rm" restore_syn "$S2" 5
n=$("$LMC" store ls "$S2" | awk '$6=="keyframe"||$6=="delta"' | wc -l)
[ "$n" = 17 ] && ok "17 snapshots left" || bad "$n snapshots left, expected 17"
check "add after rm (delta against the new head)" "$LMC" store add "$S2" "$SYN/s19.safetensors" --name w.safetensors --step 19 --keyframe-every 5 -q
check "prune --keep-last 6" "$LMC" store prune "$S2" --keep-last 6 -q
check "verify after prune" "$LMC" store verify "$S2"
check "restore all after prune" restore_syn "$S2" 5 1
first=$("$LMC" store ls "$S2" | awk 'NR==2 {print $6}')
n=$("$LMC" store ls "$S2" | awk '$6=="keyframe"||$6=="delta"' | wc -l)
[ "$n" = 6 ] && [ "$first" = keyframe ] && ok "6 snapshots left, the first a keyframe" || bad "prune left $n, first $first"
nf=$(ls "$S2/frames" | wc -l)
[ "$nf" = 6 ] && ok "no orphaned frame files after rm/prune" || bad "$nf frame files for 6 snapshots"

# rm/prune on the trajectory store (3 chains per step)
check "rm 400 in the trajectory store" "$LMC" store rm "$S" 400 -q
check "prune trajectory store --keep-last 3" "$LMC" store prune "$S" --keep-last 3 -q
check "verify trajectory store" "$LMC" store verify "$S"
check "restore trajectory steps 450 500 550" restore_all "$S" 450 500 550

# --- damage is detected ----------------------------------------------------
S3=$T/store3; cp -r "$S2" "$S3"
f=$(ls "$S3/frames" | sed -n 3p)
python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=0x10; open(p,'wb').write(b)" "$S3/frames/$f"
check_fails "verify detects a corrupted frame" "$LMC" store verify "$S3"
grep -q "frames/" "$T/last.out" && ok "the error names the frame file" || { bad "error message names the frame"; cat "$T/last.out"; }
cp -r "$S2" "$T/store4"; echo '{"format":"lmc-store","version":1,"keyframe_every":5,"next_id":1,"entries":[{"step":1}]}' >"$T/store4/manifest.json"
check_fails "a hostile manifest is refused" "$LMC" store ls "$T/store4"
cp -r "$S2" "$T/store5"; rm "$T/store5/frames/$f"
check_fails "verify detects a missing frame" "$LMC" store verify "$T/store5"

# --- killed add: the store keeps verifying and restoring --------------------
BIG=$T/big; mkdir -p "$BIG"
if [ -f "$ROOT/bench/data/traj-3m/step-000500/optim.safetensors" ] && [ -f "$ROOT/bench/data/traj-3m/step-000600/optim.safetensors" ]; then
    cp "$ROOT/bench/data/traj-3m/step-000500/optim.safetensors" "$BIG/a"
    cp "$ROOT/bench/data/traj-3m/step-000600/optim.safetensors" "$BIG/b"
else
    cat "$TRAJ"/step-0003*/* "$TRAJ"/step-0004*/* >"$BIG/a"
    cat "$TRAJ"/step-0005*/* "$TRAJ"/step-0004*/* >"$BIG/b"
fi
SK=$T/storek
"$LMC" store init "$SK" -q && "$LMC" store add "$SK" "$BIG/a" --name big --step 1 -q -T 1
killed_ok=1; k=0
for delay in 0.01 0.03 0.05 0.1 0.2 0.3 0.5; do
    k=$((k + 1))
    "$LMC" store add "$SK" "$BIG/b" --name big --step $((1 + k)) -q -T 1 &
    pid=$!
    sleep "$delay"; kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    "$LMC" store verify "$SK" -q || { echo "# verify failed after kill at ${delay}s"; killed_ok=0; }
    while read -r st; do
        "$LMC" store restore "$SK" "$st" -o "$T/k.out" -q || { killed_ok=0; continue; }
        if [ "$st" = 1 ]; then cmp -s "$T/k.out" "$BIG/a" || killed_ok=0; else cmp -s "$T/k.out" "$BIG/b" || killed_ok=0; fi
    done < <("$LMC" store ls "$SK" | awk '$6=="keyframe"||$6=="delta" {print $1}')
done
[ $killed_ok = 1 ] && ok "kill -9 of store add at 7 delays: verify passes, every snapshot restores" || bad "killed add broke the store"
check "add completes after the kills" "$LMC" store add "$SK" "$BIG/b" --name big --step 100 -q
check "verify after the kills" "$LMC" store verify "$SK"
left=$(ls -A "$SK/frames" "$SK/cache" | grep -c '\.tmp$')
[ "$left" = 0 ] && ok "no temporary files left" || bad "$left temporary files left"

# --- memory: contents larger than the process may allocate ---------------------
# Snapshots decoded on the way to another (restore, verify, rm, add without a
# cache) and the contents being coded live in files whose pages the store drops
# behind its work, not on the heap: with the heap and private mappings limited
# to 64 MiB (ulimit -d), 100 MB snapshots still add, restore through a delta,
# verify and re-encode (rm). Holding them on the heap needed 2-3 contents.
# Sanitizer builds reserve shadow memory that the limit counts: skipped there.
if ldd "$LMC" 2>/dev/null | grep -q -e libasan -e libtsan; then
    ok "memory-limited store (skipped: sanitizer build)"
else
    M=$T/mem; mkdir -p "$M"
    head -c 100000000 /dev/urandom >"$M/r0"
    cp "$M/r0" "$M/r1"
    for off in 1000 20000000 55555555 99999000; do printf 'lmc' | dd of="$M/r1" bs=1 seek=$off conv=notrunc status=none; done
    mem_store() {  # threads
        local t=$1 st=$M/store$1
        rm -rf "$st" "$M/out"
        ( ulimit -d 65536
          "$LMC" store init "$st" -q \
          && "$LMC" store add "$st" "$M/r0" --name r --step 0 -q -T"$t" \
          && "$LMC" store add "$st" "$M/r1" --name r --step 1 -q -T"$t" \
          && "$LMC" store add "$st" "$M/r0" --name r --step 2 -q -T"$t" --no-cache \
          && "$LMC" store restore "$st" 1 -o "$M/out" -q -T"$t" && cmp "$M/out" "$M/r1" \
          && "$LMC" store verify "$st" -q -T"$t" \
          && "$LMC" store rm "$st" 1 -q -T"$t" \
          && "$LMC" store restore "$st" 2 -o "$M/out" -q -T"$t" && cmp "$M/out" "$M/r0" \
          && "$LMC" store ls "$st" | grep -q "2  r .* delta" \
          && rm -rf "$st/cache" \
          && "$LMC" store restore "$st" 2 -o "$M/out" -q -T"$t" && cmp "$M/out" "$M/r0" && [ -d "$st/cache" ] )
    }
    # the last restore runs with DIR/cache removed by hand: the parent it
    # decodes goes to a temporary file there all the same (the folder is
    # made again), not onto the heap
    check "100 MB snapshots under a 64 MiB data limit: add (cache, no cache), restore, verify, rm, restore without DIR/cache (-T1)" mem_store 1
    check "the same with -T2" mem_store 2
    rm -rf "$M"
fi

# --- sharded directories -----------------------------------------------------
SH=$T/shards; mkdir -p "$SH/a" "$SH/b"
for v in a b; do
    src=$([ $v = a ] && echo "$TRAJ/step-000300" || echo "$TRAJ/step-000350")
    cp "$src/model_bf16.safetensors" "$SH/$v/model-00001-of-00002.safetensors"
    cp "$src/model_fp32.safetensors" "$SH/$v/model-00002-of-00002.safetensors"
    printf '{"metadata": {"total_size": 1153008}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}\n' >"$SH/$v/model.safetensors.index.json"
done
mkdir -p "$SH/b/sub"; cp "$TRAJ/step-000350/optim.safetensors" "$SH/b/sub/optim.safetensors"
SS=$T/stores
"$LMC" store init "$SS" -q
check "store add of a shard directory" "$LMC" store add "$SS" "$SH/a" --step 1 -q
check "store add of the next shard directory" "$LMC" store add "$SS" "$SH/b" --step 2 -q
"$LMC" store restore "$SS" 2 -o "$T/shout" -q && diff -r "$SH/b" "$T/shout" >/dev/null \
    && ok "sharded step restores byte-identical (index.json, subdirectory)" || bad "sharded store round trip"
"$LMC" store ls "$SS" | grep -q "2  model-00001-of-00002.safetensors .* delta" && ok "shards are deltas against the same name" || bad "shard deltas"

if "$LMC" -h 2>&1 | grep -q "REFDIR"; then  # sharded lmc -r REFDIR DIR, when the CLI has it
    rm -rf "$SH/b.lmc"
    check "lmc -r REFDIR DIR (sharded compress)" "$LMC" -q -r "$SH/a" "$SH/b"
    [ -f "$SH/b.lmc/model-00001-of-00002.safetensors.lmc" ] && ok "DIR.lmc holds one frame per shard" || bad "DIR.lmc layout"
    n=$("$LMC" -c -r "$SH/a/model-00001-of-00002.safetensors" "$SH/b/model-00001-of-00002.safetensors" | wc -c)
    m=$(stat -c %s "$SH/b.lmc/model-00001-of-00002.safetensors.lmc" 2>/dev/null)
    [ "$n" = "$m" ] && ok "shard compressed against the shard of the same name" || bad "shard size $m, expected $n"
    check "lmc -d -r REFDIR DIR.lmc" "$LMC" -q -d -r "$SH/a" "$SH/b.lmc" -o "$T/dirout"
    diff -r "$SH/b" "$T/dirout" >/dev/null && ok "sharded directory round trip" || bad "sharded directory round trip"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
