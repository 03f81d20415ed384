#!/usr/bin/env bash
# The one place where the tasks install Debian packages. Usage:
#
#   bash agent/tools/install-debian.sh PACKAGE...
#
# Installs the packages that are missing, as root, with apt-get, and does
# nothing when all are installed already. Tasks run their dependencies in
# parallel (`test` installs nginx and etcd while another task builds), so
# every run takes one lock (flock on $RESTYSYNC_APT_LOCK) around apt-get and
# apt-get waits for apt's own locks (DPkg::Lock::Timeout) instead of failing
# on them: two installs started at once both succeed. Exits non-zero with a
# message naming the packages when it cannot install them, so nothing skips
# quietly.
set -euo pipefail

if [ "$#" -eq 0 ]; then
	echo "usage: install-debian.sh PACKAGE..." >&2
	exit 2
fi

missing() {
	local pkg out=()
	for pkg in "$@"; do
		if [ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" != installed ]; then
			out+=("$pkg")
		fi
	done
	echo "${out[@]+"${out[@]}"}"
}

# Nothing to do is the common case: it needs neither root nor the lock.
# RESTYSYNC_APT_ALWAYS=1 runs apt-get even then (the tests of the lock use it).
if [ "${RESTYSYNC_APT_ALWAYS:-}" != 1 ] && command -v dpkg-query >/dev/null && [ -z "$(missing "$@")" ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "restysync: need root and apt-get to install: $*; install them yourself and retry" >&2
	exit 1
fi

lock="${RESTYSYNC_APT_LOCK:-/run/lock/restysync-apt.lock}"
mkdir -p "$(dirname "$lock")"
exec 9>"$lock"
if ! flock -w 1800 9; then
	echo "restysync: waited 30 minutes for $lock (another install); giving up on: $*" >&2
	exit 1
fi

# Whoever held the lock before may have installed them meanwhile.
read -r -a todo <<<"$(missing "$@")"
if [ "${RESTYSYNC_APT_ALWAYS:-}" = 1 ]; then
	todo=("$@")
elif [ "${#todo[@]}" -eq 0 ]; then
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt_get() {
	apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 "$@"
}

# Keep packages with services (etcd-server) from starting system-wide ones:
# the tests start their own, on loopback ports of their choosing.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi

# Refresh the package lists at most once an hour, and whenever an install
# finds a package missing from stale lists.
stamp=/var/lib/apt/periodic/restysync-update-stamp
update() {
	echo "restysync: apt-get update" >&2
	apt_get update -qq >&2
	mkdir -p "$(dirname "$stamp")" && touch "$stamp"
}
if [ ! -e "$stamp" ] || [ -n "$(find "$stamp" -mmin +60)" ]; then
	update
fi
echo "restysync: installing ${todo[*]} with apt-get" >&2
if ! apt_get install -y -qq --no-install-recommends "${todo[@]}" >/dev/null; then
	update
	apt_get install -y -qq --no-install-recommends "${todo[@]}" >/dev/null
fi
echo "restysync: installed ${todo[*]}" >&2
