#!/usr/bin/env bash
# Installs those of the given Debian packages that are not installed yet (with sudo when not root), so
# the set-up and test scripts can be re-run cheaply: nothing is fetched when everything is there.
#   scripts/apt_install.sh PACKAGE...
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
echo "apt: installing ${missing[*]}"
SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
