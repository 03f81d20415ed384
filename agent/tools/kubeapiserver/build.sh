#!/usr/bin/env bash
# Builds the pinned kube-apiserver used by the end-to-end tests into a cache
# folder outside the repo. Idempotent: does nothing when it is there already.
# Prints the path of the kube-apiserver binary on stdout. (etcd comes from
# Debian's etcd-server, installed by install-debian.sh like every package.)
set -euo pipefail

version=v1.37.2
cache="${RESTYSYNC_CACHE:-$HOME/.cache/restysync}"
bin="$cache/bin/kube-apiserver-$version"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

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

build_apiserver
echo "$bin"
