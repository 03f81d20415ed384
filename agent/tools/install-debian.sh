#!/usr/bin/env bash
# Installs Debian packages for the tasks, as root, with apt-get. Exits non-zero
# with a clear message when that is not possible, so nothing skips quietly.
set -euo pipefail
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "restysync: need root and apt-get to install: $*; install them yourself and retry" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Update the package lists at most once an hour.
stamp=/var/lib/apt/periodic/restysync-update-stamp
if [ ! -e "$stamp" ] || [ -n "$(find "$stamp" -mmin +60)" ]; then
  apt-get update -qq
  mkdir -p "$(dirname "$stamp")" && touch "$stamp"
fi
apt-get install -y -qq --no-install-recommends "$@" >/dev/null
echo "installed: $*"
