#!/usr/bin/env bash
# ab.sh - the working tree's library against a commit's, in one process
# (bench/ab.c: the two builds take turns call by call). Builds the commit's
# liblmc.a in a scratch worktree (cached in build/ab/COMMIT), renames its
# global symbols old_*, links bench/ab.c against both and runs it.
#
#   bench/ab.sh [-b COMMIT] NEW REF|none c|d [rounds [threads]]
#
# COMMIT defaults to HEAD: the uncommitted change against the last commit.
# Build the working tree's liblmc.a first (make liblmc.a).
set -euo pipefail
cd "$(dirname "$0")/.."
base=HEAD
if [ "${1:-}" = -b ]; then base=$2; shift 2; fi
[ $# -ge 3 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
[ -f liblmc.a ] || { echo "ab.sh: no liblmc.a here: run make liblmc.a" >&2; exit 2; }
rev=$(git rev-parse --verify "$base^{commit}")
dir=build/ab/$rev
if [ ! -f "$dir/liblmc_old.a" ]; then
    echo "ab.sh: building liblmc.a at ${rev:0:12}" >&2
    rm -rf "$dir"
    mkdir -p "$dir"
    wt=$(mktemp -d)
    git worktree add -q --detach "$wt" "$rev"
    trap 'git worktree remove --force "$wt" 2>/dev/null || true' EXIT
    make -s -C "$wt" -j"$(nproc)" liblmc.a >&2
    nm --defined-only -g "$wt/liblmc.a" | awk 'NF == 3 { print $3 " old_" $3 }' | sort -u > "$dir/syms"
    objcopy --redefine-syms="$dir/syms" "$wt/liblmc.a" "$dir/liblmc_old.a"
fi
gcc -O2 -Wall -Wextra -Iinclude -Ibench bench/ab.c liblmc.a "$dir/liblmc_old.a" -ljansson -lpthread -lm -o "$dir/ab"
"$dir/ab" "$@"
