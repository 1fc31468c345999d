#!/usr/bin/env bash
# Builds idemstore's PostgreSQL test image from Debian packages, because the
# machines that test idemstore (and CI) cannot pull any image.
#
#   docker/postgres/build.sh           build unless the tag exists from this recipe
#   docker/postgres/build.sh --force   rebuild
#
# Env: IDEMSTORE_TEST_PG_IMAGE (Defaults to idemstore-postgres:15) names the
# tag; DEBIAN_SUITE (Defaults to bookworm) the Debian release. mmdebstrap
# reads the machine's apt configuration, so it uses whatever mirror apt uses.
# Needs root (or sudo) for apt-get and mmdebstrap.
set -Eeuo pipefail

image="${IDEMSTORE_TEST_PG_IMAGE:-idemstore-postgres:15}"
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

# The image is labelled with a hash of its recipe, so an image built from an
# older Dockerfile or entrypoint (machines are reused) is rebuilt.
recipe="$(cat "$here/Dockerfile" "$here/entrypoint.sh" | sha256sum | cut -c1-16)"
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

# The root filesystem (about 100 MB) is built outside the repository, and the
# build context holds only what the Dockerfile needs.
work="$(mktemp -d "${TMPDIR:-/tmp}/idemstore-pg.XXXXXX")"
trap '"${sudo[@]}" rm -rf "$work"' EXIT

step "building the $suite root filesystem with postgresql-15 (mmdebstrap)"
# The Debian package creates a cluster "main" on install; the entrypoint
# makes its own in PGDATA, so that one is dropped. Docs and man pages only
# make the image bigger.
"${sudo[@]}" mmdebstrap --quiet --variant=apt --include=postgresql-15 \
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
