#!/usr/bin/env bash
# Builds Jaeger (the version e2e/jaeger/go.mod pins as a tool) once, into a
# cache outside the repository, and prints the binary's path. The tracing
# tests (e2e/tracing) run it; .ci/run exports the path as TOOLPOOL_JAEGER.
#
#	e2e/jaeger/build.sh            # builds if missing, prints the path
#	TOOLPOOL_JAEGER=$(e2e/jaeger/build.sh) go test ./e2e/tracing/
#
# The path is ${XDG_CACHE_HOME:-$HOME/.cache}/toolpool/jaeger-<version>/jaeger
# (or $1 when given). The build takes about 8 minutes on 2 cores and gives
# one binary of about 120 MB; a binary already there is kept. Jaeger's
# module has replace directives, so `go install` refuses it: it is built
# from this small module of its own, and the project's go.mod does not take
# its dependencies.
set -euo pipefail
cd "$(dirname "$0")"

version=$(go list -m -f '{{.Version}}' github.com/jaegertracing/jaeger)
out=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/toolpool/jaeger-$version/jaeger}
if [ -x "$out" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$(dirname "$out")"
# Build to a temporary name in the same directory, then rename: an
# interrupted build leaves no half-written binary at the path the tests use.
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
echo "building Jaeger $version into $out (about 8 minutes on 2 cores)" >&2
go build -o "$tmp" github.com/jaegertracing/jaeger/cmd/jaeger
chmod 755 "$tmp"
mv -f "$tmp" "$out"
echo "$out"
