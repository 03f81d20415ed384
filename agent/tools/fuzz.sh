#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 30s).
# Seeds and regressions under testdata/fuzz run in every `go test` anyway.
set -euo pipefail
fuzztime="${1:-30s}"
cd "$(dirname "$0")/../.."
grep -rl --include='*_test.go' '^func Fuzz' agent | sort | while read -r file; do
  pkg="./$(dirname "$file")"
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    echo "== $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done
