#!/usr/bin/env bash
# Builds a pinned Kubernetes component used by the end-to-end tests into a
# cache folder outside the repo: kube-apiserver (the default) or
# kube-controller-manager, both from k8s.io/kubernetes v1.37.2 (this
# folder's go.mod, its `tool` block). Idempotent: does nothing when the
# binary is there already. Prints the path of the binary on stdout. (etcd
# comes from Debian's etcd-server, installed by install-debian.sh like every
# package.)
#
#   build.sh [kube-apiserver|kube-controller-manager]
set -euo pipefail

version=v1.37.2
component="${1:-kube-apiserver}"
case "$component" in
kube-apiserver | kube-controller-manager) ;;
*)
	echo "build.sh: unknown component $component: want kube-apiserver or kube-controller-manager" >&2
	exit 2
	;;
esac
cache="${RESTYSYNC_CACHE:-$HOME/.cache/restysync}"
bin="$cache/bin/$component-$version"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# Builds that run at once (two tasks, two helpers) each write their own
# temporary file and rename it into place: the binary appears whole, once.
build() {
	if [ -x "$bin" ]; then
		return
	fi
	mkdir -p "$(dirname "$bin")"
	local tmp="$bin.tmp.$$"
	echo "building $component $version into $bin (takes a while the first time)" >&2
	local start=$SECONDS
	local pkg=k8s.io/component-base/version
	(
		cd "$here"
		GOWORK=off CGO_ENABLED=0 go build -trimpath \
			-ldflags "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=37" \
			-o "$tmp" "k8s.io/kubernetes/cmd/$component"
	) || {
		rm -f "$tmp"
		exit 1
	}
	mv -f "$tmp" "$bin"
	echo "built $component in $((SECONDS - start))s" >&2
}

build
echo "$bin"
