#!/bin/sh
# Installs what lmc needs to build, test and run its demo on Debian 12, if missing.
# Usage: tools/deps.sh [extra-package...]
set -e
pkgs="make gcc libc6-dev pkg-config libjansson-dev libxxhash-dev libcmocka-dev zstd bzip2 xz-utils python3 $*"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "tools/deps.sh: installing:$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
