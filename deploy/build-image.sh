#!/usr/bin/env bash
# Builds the deploy image (deploy/Dockerfile) from this repository: cmd/migrate
# and cmd/idemctl compiled here (static, CGO off), psql from the base image's
# packages, and deploy/grants.sql.
#
#   deploy/build-image.sh TAG
#
# Env: BASE_IMAGE (Defaults to debian:bookworm-slim); GOOS, GOARCH and
# CGO_ENABLED as for go build (Defaults: linux, this machine's architecture,
# 0 for static binaries that run on any base image).
set -Eeuo pipefail

if [ $# -ne 1 ]; then
	echo "usage: $0 TAG" >&2
	exit 2
fi
tag="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ctx="$(mktemp -d "${TMPDIR:-/tmp}/idemstore-deploy.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT

export CGO_ENABLED="${CGO_ENABLED:-0}" GOOS="${GOOS:-linux}"
(cd "$root" && go build -o "$ctx/migrate" ./cmd/migrate && go build -o "$ctx/idemctl" ./cmd/idemctl)
cp "$root/deploy/Dockerfile" "$root/deploy/grants.sql" "$ctx/"
docker build --build-arg BASE_IMAGE="${BASE_IMAGE:-debian:bookworm-slim}" -t "$tag" "$ctx"
