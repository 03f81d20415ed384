#!/usr/bin/env bash
# Builds the pinned kube-apiserver used by the end-to-end tests into a cache
# folder outside the repo, and installs Debian's etcd-server when etcd is
# missing. Idempotent: does nothing when both are already there. Prints the
# path of the kube-apiserver binary on stdout.
set -euo pipefail

version=v1.37.2
cache="${RESTYSYNC_CACHE:-$HOME/.cache/restysync}"
bin="$cache/bin/kube-apiserver-$version"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

install_etcd() {
	if command -v etcd >/dev/null 2>&1; then
		return
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "etcd not found on PATH; install Debian's etcd-server (needs root)" >&2
		return
	fi
	echo "installing etcd-server with apt-get" >&2
	# Keep the package's init script from starting a system-wide etcd.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y --no-install-recommends etcd-server >&2
}

build_apiserver() {
	if [ -x "$bin" ]; then
		return
	fi
	mkdir -p "$(dirname "$bin")"
	local tmp="$bin.tmp.$$"
	echo "building kube-apiserver $version into $bin (takes a while the first time)" >&2
	local start=$SECONDS
	local pkg=k8s.io/component-base/version
	(
		cd "$here"
		GOWORK=off CGO_ENABLED=0 go build -trimpath \
			-ldflags "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=37" \
			-o "$tmp" k8s.io/kubernetes/cmd/kube-apiserver
	) || {
		rm -f "$tmp"
		exit 1
	}
	mv -f "$tmp" "$bin"
	echo "built kube-apiserver in $((SECONDS - start))s" >&2
}

install_etcd
build_apiserver
echo "$bin"
