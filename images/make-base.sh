#!/usr/bin/env bash
# Make the local base image mkb-base:bookworm-<arch> from Debian's mirror, for machines that reach no image
# registry: debootstrap --variant=minbase, trimmed, then `docker import`.  Needs root, debootstrap and a
# Docker daemon (DOCKER_HOST).  For arm64 on an x86 host, debootstrap's second stage runs under qemu: it needs
# qemu-user-static and registered binfmt handlers (see images/README.md).
#
#   images/make-base.sh amd64 [MIRROR]
#   python -m kit.images base --arch amd64      # then record the image id in images/lock.toml
set -euo pipefail

arch="${1:?usage: make-base.sh amd64|arm64 [mirror]}"
mirror="${2:-http://deb.debian.org/debian}"
suite=bookworm
tag="mkb-base:${suite}-${arch}"
case "$arch" in amd64|arm64) ;; *) echo "arch must be amd64 or arm64, got '$arch'" >&2; exit 2;; esac

work="$(mktemp -d "${TMPDIR:-/tmp}/mkb-base.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

host_arch="$(dpkg --print-architecture)"
if [ "$arch" = "$host_arch" ]; then
  debootstrap --variant=minbase --arch="$arch" "$suite" "$rootfs" "$mirror"
else
  # foreign architecture: unpack, then run the second stage under qemu (binfmt must be registered)
  debootstrap --variant=minbase --arch="$arch" --foreign "$suite" "$rootfs" "$mirror"
  cp /usr/bin/qemu-aarch64-static "$rootfs/usr/bin/"
  chroot "$rootfs" /debootstrap/debootstrap --second-stage
  rm -f "$rootfs/usr/bin/qemu-aarch64-static"
fi

# trim: apt lists, caches, logs; the image's own RUN steps run apt-get update
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
       "$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/root/.cache
printf 'deb %s %s main\ndeb %s %s-updates main\ndeb http://deb.debian.org/debian-security %s-security main\n' \
  "$mirror" "$suite" "$mirror" "$suite" "$suite" > "$rootfs/etc/apt/sources.list"

tar --numeric-owner -C "$rootfs" -c . \
  | docker import --platform "linux/$arch" \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["/bin/bash"]' \
      --message "debootstrap --variant=minbase $suite $arch from $mirror" - "$tag"
docker image inspect --format '{{.Id}} {{.Architecture}}' "$tag"
