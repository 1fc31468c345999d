#!/usr/bin/env bash
# Builds idemstore's pg_auto_failover test image (monitor + two PostgreSQL 15
# nodes in one container) from Debian packages, because the machines that
# test idemstore (and CI) cannot pull any image. internal/pgha starts it.
#
#   docker/pgautofailover/build.sh           build unless the tag exists from this recipe
#   docker/pgautofailover/build.sh --force   rebuild
#
# Env: IDEMSTORE_TEST_PGHA_IMAGE (default idemstore-pgautofailover:15) names
# the tag; DEBIAN_SUITE (default bookworm) the Debian release. mmdebstrap
# reads the machine's apt configuration, so it uses whatever mirror apt uses.
# Needs root (or sudo) for apt-get and mmdebstrap.
set -Eeuo pipefail

image="${IDEMSTORE_TEST_PGHA_IMAGE:-idemstore-pgautofailover:15}"
suite="${DEBIAN_SUITE:-bookworm}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

force=0
case "${1:-}" in
'') ;;
-f | --force) force=1 ;;
*)
	echo "usage: $0 [--force]" >&2
	exit 2
	;;
esac

# The image is labelled with a hash of its recipe (this script included: it
# names the packages), so an image built from an older recipe (machines are
# reused) is rebuilt.
recipe="$(cat "$here/build.sh" "$here/Dockerfile" "$here/entrypoint.sh" | sha256sum | cut -c1-16)"
have="$(docker image inspect --format '{{ index .Config.Labels "idemstore.recipe" }}' "$image" 2>/dev/null || true)"
if [ "$force" = 0 ] && [ "$have" = "$recipe" ]; then
	echo "$image is up to date (recipe $recipe); skipping (use --force to rebuild)"
	exit 0
fi

sudo=()
if [ "$(id -u)" != 0 ]; then
	sudo=(sudo)
fi

# step prints what comes next and how long the previous step took.
step_start=$SECONDS
step() {
	echo "[$((SECONDS - step_start))s] $*"
}

if ! command -v mmdebstrap >/dev/null 2>&1; then
	step "installing mmdebstrap (apt-get update, install)"
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/idemstore-pgha.XXXXXX")"
trap '"${sudo[@]}" rm -rf "$work"' EXIT

step "building the $suite root filesystem with pg_auto_failover (mmdebstrap)"
# postgresql-15-auto-failover is the monitor's extension and pulls in
# postgresql-15; pg-auto-failover-cli is pg_autoctl; tini is PID 1. The
# Debian package creates a cluster "main" on install; pg_autoctl makes its
# own, so that one is dropped. Docs and man pages only make the image bigger.
"${sudo[@]}" mmdebstrap --quiet --variant=apt \
	--include=postgresql-15,postgresql-15-auto-failover,pg-auto-failover-cli,tini \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--customize-hook='rm -rf "$1"/etc/postgresql/15/main "$1"/var/lib/postgresql/15/main' \
	"$suite" "$work/rootfs.tar"
"${sudo[@]}" chmod a+r "$work/rootfs.tar"

cp "$here/Dockerfile" "$here/entrypoint.sh" "$work/"
chmod +x "$work/entrypoint.sh"
step "building $image (docker build)"
docker build --quiet --label "idemstore.recipe=$recipe" --tag "$image" "$work"
step "built $image"
