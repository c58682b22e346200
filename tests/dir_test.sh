#!/usr/bin/env bash
# dir_test.sh LMC - tests of directory inputs (sharded checkpoints):
#   lmc [-r REFDIR] DIR, lmc -d [-r REFDIR] DIR.lmc, -t, -l, -o, -f, --rm.
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
# check_fails DESC CMD...: CMD must exit with status 1
check_fails() {
    local d=$1; shift
    "$@" >"$T/last.out" 2>&1; local rc=$?
    if [ $rc = 1 ]; then ok "$d"; else bad "$d (exit $rc)"; sed 's/^/#   /' "$T/last.out" | head -20; fi
}
cmp_tree() { diff -r "$1" "$2" >/dev/null 2>&1; }
no_tmp() { [ -z "$(find "$1" -name '.*.tmp-*' 2>/dev/null)" ]; }

# --- two sharded checkpoints: step 300 (reference) and step 350 -------------
mk() {  # mk DIR STEPDIR
    mkdir -p "$1/optim"
    cp "$2/model_bf16.safetensors" "$1/model-00001-of-00002.safetensors"
    cp "$2/model_fp32.safetensors" "$1/model-00002-of-00002.safetensors"
    printf '{"metadata": {"total_size": 1153008}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}\n' >"$1/model.safetensors.index.json"
    cp "$2/optim.safetensors" "$1/optim/rank-0.safetensors"
}
A=$T/ckpt-300; B=$T/ckpt-350
mk "$A" "$TRAJ/step-000300"
mk "$B" "$TRAJ/step-000350"
FILES="model-00001-of-00002.safetensors model-00002-of-00002.safetensors model.safetensors.index.json optim/rank-0.safetensors"

"$LMC" -h 2>&1 | grep -q REFDIR && ok "lmc -h mentions REFDIR" || bad "lmc -h mentions REFDIR"

# --- compress against the reference directory ------------------------------
check "lmc -r REFDIR DIR" "$LMC" -q -r "$A" "$B"
all=1; for f in $FILES; do [ -f "$B.lmc/$f.lmc" ] || { echo "# missing $B.lmc/$f.lmc"; all=0; }; done
[ $all = 1 ] && ok "every file has its REL.lmc (nested optim/ kept)" || bad "output layout"
[ "$(find "$B.lmc" -type f | wc -l)" = 4 ] && ok "nothing else in DIR.lmc" || bad "extra files in DIR.lmc"
check "independent compression (no reference) with -o" "$LMC" -q "$B" -o "$T/indep"
smaller=1
for f in $FILES; do
    case $f in *.json) continue ;; esac
    d=$(stat -c %s "$B.lmc/$f.lmc"); w=$(stat -c %s "$T/indep/$f.lmc")
    [ "$d" -lt "$w" ] || { echo "# $f: delta $d >= whole $w"; smaller=0; }
done
[ $smaller = 1 ] && ok "every shard delta is smaller than its independent compression" || bad "delta sizes"
n=$("$LMC" -c -r "$A/model-00002-of-00002.safetensors" "$B/model-00002-of-00002.safetensors" | wc -c)
[ "$n" = "$(stat -c %s "$B.lmc/model-00002-of-00002.safetensors.lmc")" ] \
    && ok "shard coded exactly like the single-file delta" || bad "shard differs from single-file delta"
"$LMC" -l "$B.lmc/model.safetensors.index.json.lmc" | grep -q "container generic" \
    && ok "index JSON coded in generic mode" || bad "index JSON container"

# --- decompress against the uncompressed reference directory ---------------
check "lmc -d -r REFDIR DIR.lmc -o OUT" "$LMC" -q -d -r "$A" "$B.lmc" -o "$T/out1"
cmp_tree "$B" "$T/out1" && ok "restored tree is identical (diff -r)" || bad "restored tree differs"
mkdir "$T/dflt"; cp -r "$B.lmc" "$T/dflt/x.lmc"
check "lmc -d DIR.lmc strips the .lmc suffix" "$LMC" -q -d -r "$A" "$T/dflt/x.lmc"
cmp_tree "$B" "$T/dflt/x" && ok "default output directory restored" || bad "default output directory"
check "lmc -d -T 1 (threads apply to every file)" "$LMC" -q -T 1 -d -r "$A" "$B.lmc" -o "$T/out1t"
cmp_tree "$B" "$T/out1t" && ok "-T 1 restore identical" || bad "-T 1 restore differs"

# --- test and list ----------------------------------------------------------
check "lmc -t -r REFDIR DIR.lmc" "$LMC" -t -r "$A" "$B.lmc"
[ "$(grep -c ': OK' "$T/last.out")" = 4 ] && ok "-t reports every file" || bad "-t output: $(cat "$T/last.out")"
check "lmc -l DIR.lmc" "$LMC" -l "$B.lmc"
[ "$(grep -c '^  compressed' "$T/last.out")" = 4 ] && grep -q "optim/rank-0.safetensors.lmc" "$T/last.out" \
    && ok "-l lists every file" || bad "-l output"
check_fails "lmc -t without -r on a delta directory fails" "$LMC" -t "$B.lmc"
[ "$(grep -c 'reference' "$T/last.out")" = 4 ] && ok "-t names each failing file" || bad "-t failure messages"

# --- a delta without its reference -----------------------------------------
check_fails "lmc -d without -r fails with exit 1" "$LMC" -q -d "$B.lmc" -o "$T/noref"
grep -q "model-00001-of-00002.safetensors.lmc: .*reference" "$T/last.out" && ok "error names the file" || bad "error message"
[ ! -e "$T/noref" ] && ok "no partial outputs (nothing left)" || { bad "partial outputs left"; find "$T/noref" | sed 's/^/#   /'; }
rm -rf "$T/refpart"; cp -r "$A" "$T/refpart"; rm "$T/refpart/model-00002-of-00002.safetensors"
check_fails "restore with one reference shard missing fails" "$LMC" -q -d -r "$T/refpart" "$B.lmc" -o "$T/part"
grep -q "model-00002-of-00002.safetensors.lmc: .*$T/refpart/model-00002-of-00002.safetensors" "$T/last.out" \
    && ok "REF_REQUIRED message names the missing reference" || bad "missing-reference message: $(cat "$T/last.out")"
[ ! -e "$T/part/model-00002-of-00002.safetensors" ] && no_tmp "$T/part" \
    && cmp "$B/model-00001-of-00002.safetensors" "$T/part/model-00001-of-00002.safetensors" >/dev/null 2>&1 \
    && cmp_tree "$B/optim" "$T/part/optim" \
    && ok "the other files are restored, the failed one is absent, no temp files" || bad "partial restore state"

# --- missing reference shard at compression: coded whole --------------------
rm -rf "$T/refless"; cp -r "$A" "$T/refless"; rm "$T/refless/optim/rank-0.safetensors"
check "compress with a reference shard missing" "$LMC" -v -r "$T/refless" "$B" -o "$T/mix"
grep -q "rank-0.safetensors: no reference .*coded whole" "$T/last.out" && ok "-v notes the file coded whole" || bad "-v note"
"$LMC" -l "$T/mix/optim/rank-0.safetensors.lmc" | grep -q "reference     none" && ok "missing-ref shard is a keyframe" || bad "missing-ref shard not a keyframe"
"$LMC" -l "$T/mix/model-00001-of-00002.safetensors.lmc" | grep -q "delta frame" && ok "other shards are deltas" || bad "other shards"
check "restore: keyframe with no ref, deltas with ref" "$LMC" -q -d -r "$T/refless" "$T/mix" -o "$T/mixout"
cmp_tree "$B" "$T/mixout" && ok "mixed tree restores identical" || bad "mixed tree differs"
check "restore with the full REFDIR (reference present for the keyframe)" "$LMC" -q -d -r "$A" "$T/mix" -o "$T/mixout2"
cmp_tree "$B" "$T/mixout2" && ok "mixed tree restores identical with the full REFDIR" || bad "mixed tree differs (full REFDIR)"

# --- existing output, -f ------------------------------------------------------
check_fails "existing output directory without -f is refused" "$LMC" -q -r "$A" "$B"
grep -q "already exists" "$T/last.out" && ok "refusal says the directory exists" || bad "refusal message"
check_fails "existing restore directory without -f is refused" "$LMC" -q -d -r "$A" "$B.lmc" -o "$T/out1"
check "-f writes into an existing output directory" "$LMC" -q -f -r "$A" "$B"
n=$("$LMC" -c -r "$A/model-00001-of-00002.safetensors" "$B/model-00001-of-00002.safetensors" | wc -c)
[ "$n" = "$(stat -c %s "$B.lmc/model-00001-of-00002.safetensors.lmc")" ] && ok "-f overwrote with the same frames" || bad "-f output"
check_fails "an output path that is a file is refused" "$LMC" -q -f "$B" -o "$A/model.safetensors.index.json"
check_fails "-c with a directory is refused" "$LMC" -c "$B"
check_fails "-r FILE with a directory input is refused" "$LMC" -q -r "$A/model.safetensors.index.json" "$B" -o "$T/bad1"
check_fails "-r REFDIR with a file input is refused" "$LMC" -q -r "$A" "$B/model.safetensors.index.json" -o "$T/bad2"

# --- symlinks and --format/--dtype ------------------------------------------
rm -rf "$T/ln"; cp -r "$B" "$T/ln"; ln -s model-00001-of-00002.safetensors "$T/ln/link.safetensors"
check "a symlink in DIR is skipped with a warning" "$LMC" -r "$A" "$T/ln"
grep -q "link.safetensors: warning: symbolic link skipped" "$T/last.out" && [ ! -e "$T/ln.lmc/link.safetensors.lmc" ] \
    && ok "symlink not compressed" || bad "symlink handling"
check "--format=generic applies to every file" "$LMC" -q --format=generic "$B" -o "$T/gen"
"$LMC" -l "$T/gen/model-00001-of-00002.safetensors.lmc" | grep -q "container generic" && ok "shard coded generic" || bad "--format not applied"

# --- --rm ----------------------------------------------------------------------
rm -rf "$T/rm"; cp -r "$B" "$T/rm"
check "--rm compresses and removes the inputs" "$LMC" -q --rm -r "$A" "$T/rm"
[ -d "$T/rm" ] && [ -d "$T/rm/optim" ] && [ -z "$(find "$T/rm" -type f)" ] \
    && ok "--rm removed every input file, kept the directories" || bad "--rm compress state"
check "-d --rm restores and removes the frames" "$LMC" -q -d --rm -r "$A" "$T/rm.lmc" -o "$T/rmout"
cmp_tree "$B" "$T/rmout" && [ -d "$T/rm.lmc/optim" ] && [ -z "$(find "$T/rm.lmc" -type f)" ] \
    && ok "--rm round trip identical, frames removed, directories kept" || bad "--rm decompress state"
rm -rf "$T/rm2"; cp -r "$B.lmc" "$T/rm2.lmc"
check_fails "-d --rm without -r fails" "$LMC" -q -d --rm "$T/rm2.lmc" -o "$T/rm2out"
[ "$(find "$T/rm2.lmc" -type f | wc -l)" = 4 ] && ok "--rm keeps inputs that failed" || bad "--rm removed a failed input"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
