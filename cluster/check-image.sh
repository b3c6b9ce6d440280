#!/usr/bin/env bash
# Run on a cluster node's host before Ray starts the kit's container (initialization_commands of
# cluster/aws-graviton.yaml): pull IMAGE, refuse it unless its image id is the one images/lock.toml records
# for ARCH and it has what Ray's docker runner needs.  Exit 0 when fine, 2 with the reason otherwise.
#
#   check-image.sh IMAGE LOCK_TOML ARCH          e.g. check-image.sh registry/mkb-kit:arm64 images/lock.toml arm64
#   check-image.sh --lock-id LOCK_TOML ARCH      print [image.ARCH].id of the lock (empty when none)
set -euo pipefail

lock_id() {  # $1 lock file, $2 arch: the id = "sha256:..." line of the [image.<arch>] table
    awk -v table="[image.$2]" '
        /^[[:space:]]*\[/ { gsub(/[[:space:]]/, ""); inside = ($0 == table); next }
        inside && /^[[:space:]]*id[[:space:]]*=/ { sub(/^[^=]*=[[:space:]]*"/, ""); sub(/".*$/, ""); print; exit }
    ' "$1"
}

fail() { echo "check-image.sh: $*" >&2; exit 2; }

if [ "${1:-}" = --lock-id ]; then
    [ $# -eq 3 ] || fail "usage: check-image.sh --lock-id LOCK_TOML ARCH"
    lock_id "$2" "$3"
    exit 0
fi
[ $# -eq 3 ] || fail "usage: check-image.sh IMAGE LOCK_TOML ARCH"
image=$1 lock=$2 arch=$3
[ -f "$lock" ] || fail "$lock: lock file not found (is images/ in the launcher's file_mounts?)"
case "$image" in *REPLACE_ME*) fail "$image: fill in the registry the kit's $arch image was pushed to";; esac

want=$(lock_id "$lock" "$arch")
[ -n "$want" ] || fail "$lock has no [image.$arch] id: build the $arch image (nox -s images -- build --arch $arch), push it, commit the lock"
docker pull --quiet "$image" >/dev/null || fail "docker pull $image failed (registry login? for ECR: aws ecr get-login-password | docker login)"
got=$(docker image inspect --format '{{.Id}}' "$image")
[ "$got" = "$want" ] || fail "$image has image id $got; $lock [image.$arch].id is $want: push the locked image or re-lock"
got_arch=$(docker image inspect --format '{{.Architecture}}' "$image")
[ "$got_arch" = "$arch" ] || fail "$image is $got_arch, not $arch"
# Ray copies files into the container with rsync, and the head's autoscaler reaches the workers by ssh
missing=$(docker run --rm --network none --entrypoint= "$image" sh -c \
    'for t in rsync ssh; do command -v "$t" >/dev/null || printf "%s " "$t"; done')
[ -z "$missing" ] || fail "$image lacks ${missing% }, which Ray's docker runner needs: add them to the image"
echo "check-image.sh: $image is $want ($arch), as locked"
