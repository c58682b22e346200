#!/bin/bash
# Builds liblmc for aarch64 (Debian's cross-compiler) and checks, under
# qemu-user, that its frames are byte for byte the frames of the native
# build, and that each build decodes the other's, keyframes and deltas.
# An aarch64 build runs the portable C loops (the SIMD ones are x86 only), so
# this also checks those loops against the x86 ones on real checkpoints.
#
#   bash tools/cross_aarch64.sh NEW REF [NEW REF ...]     (safetensors or raw files)
#
# Installs gcc-aarch64-linux-gnu, qemu-user and the arm64 -dev packages
# (adds the arm64 architecture to dpkg). One coding thread: qemu-user 7.2
# on the project's VMs hangs in pthread_create, so neither the CLI (which
# starts helper threads) nor more than one thread can run under it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] && [ $(($# % 2)) -eq 0 ] || { echo "usage: $0 NEW REF [NEW REF ...]" >&2; exit 2; }

need=""
for p in gcc-aarch64-linux-gnu qemu-user libjansson-dev:arm64 libxxhash-dev:arm64; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need="$need $p"
done
if [ -n "$need" ]; then
    dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
    apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# a copy of the sources, so that the native build/ is left alone
mkdir -p "$work/src"
cp -r Makefile include lib "$work/src/"
make -s -C "$work/src" -j"$(nproc)" CC=aarch64-linux-gnu-gcc liblmc.a
aarch64-linux-gnu-gcc -O2 -Iinclude bench/api_loop.c "$work/src/liblmc.a" -ljansson -lpthread -lm -o "$work/api_arm"
make -s liblmc.a
gcc -O2 -Iinclude bench/api_loop.c liblmc.a -ljansson -lpthread -lm -o "$work/api_x86"
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu

fail=0
check() {  # check NEW REF|none LABEL
    local new=$1 ref=$2 label=$3
    OUT="$work/x86.lmc" "$work/api_x86" "$new" "$ref" c 1 1 >/dev/null
    OUT="$work/arm.lmc" qemu-aarch64 "$work/api_arm" "$new" "$ref" c 1 1 >/dev/null
    if cmp -s "$work/x86.lmc" "$work/arm.lmc"; then
        echo "ok    $label: aarch64 frame = x86 frame ($(stat -c %s "$work/x86.lmc") bytes)"
    else
        echo "FAIL  $label: the aarch64 and x86 frames differ"; fail=1
    fi
    # api_loop's d mode compresses with its own build, then decodes and compares;
    # the frames being equal, each build has decoded the other's
    if qemu-aarch64 "$work/api_arm" "$new" "$ref" d 1 1 >/dev/null; then
        echo "ok    $label: aarch64 decodes it exactly"
    else
        echo "FAIL  $label: aarch64 round trip"; fail=1
    fi
}
name() { echo "$(basename "$(dirname "$1")")/$(basename "$1")"; }
while [ $# -ge 2 ]; do
    check "$1" none "$(name "$1") keyframe"
    check "$1" "$2" "$(name "$1") against $(name "$2")"
    shift 2
done
[ $fail -eq 0 ] && echo "aarch64: all frames identical to x86's" || { echo "aarch64: FAILED"; exit 1; }
