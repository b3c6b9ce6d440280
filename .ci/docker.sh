# Sourced by .ci/run: a Docker daemon of CI's own and the images the docker tests use.
#   ci_docker_up     start dockerd (its own socket and data root) unless one answers at DOCKER_HOST
#   ci_kit_image     images/make-base.sh + a kit image with SKIP_MNN_BUILD=1, cached by the inputs' hash

CI_DOCKER_ROOT="${CI_DOCKER_ROOT:-/var/lib/mkb-ci-docker}"
export DOCKER_HOST="${DOCKER_HOST:-unix:///run/mkb-ci-docker.sock}"

ci_docker_up() {
  if docker version >/dev/null 2>&1; then return 0; fi
  local driver=vfs probe
  probe="$(mktemp -d)"
  mkdir -p "$probe"/{l,u,w,m}
  if mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null; then
    umount "$probe/m"; driver=overlay2   # overlay2: a container starts in ~1 s; vfs copies the whole image
  fi
  rm -rf "$probe"
  mkdir -p "$CI_DOCKER_ROOT"
  setsid dockerd --data-root "$CI_DOCKER_ROOT" --exec-root /run/mkb-ci-docker --pidfile /run/mkb-ci-docker.pid \
    --storage-driver="$driver" --iptables=false --ip6tables=false --bridge=none -H "$DOCKER_HOST" \
    >"$CI_DOCKER_ROOT.log" 2>&1 < /dev/null &
  for _ in $(seq 60); do docker version >/dev/null 2>&1 && return 0; sleep 1; done
  echo "dockerd did not start; see $CI_DOCKER_ROOT.log" >&2; tail -20 "$CI_DOCKER_ROOT.log" >&2; return 1
}

ci_kit_image() {
  # the image's inputs: a rebuild only when the Dockerfile, the pins or the kit change
  local key
  key="$(cat images/Dockerfile images/requirements.lock pyproject.toml $(git ls-files kit) | sha256sum | cut -c1-16)"
  export MKB_TEST_IMAGE="mkb-kit:ci-$key"
  if docker image inspect "$MKB_TEST_IMAGE" >/dev/null 2>&1; then return 0; fi
  # (called in an `if`, where set -e does not apply: each step returns on failure)
  docker image inspect mkb-base:bookworm-amd64 >/dev/null 2>&1 || images/make-base.sh amd64 >/dev/null || return 1
  local lock
  lock="$(mktemp)"; cp images/lock.toml "$lock"   # the repository's lock stays as it is
  cp images/requirements.lock "$(dirname "$lock")/requirements.lock"   # the lock names it beside itself
  python -m kit.images --lock "$lock" base --arch amd64 >/dev/null || return 1
  python -m kit.images --lock "$lock" build --arch amd64 --skip-mnn-build --tag "$MKB_TEST_IMAGE" --quiet \
    ${CI_CA_CERT:+--ca-cert "$CI_CA_CERT"} || { rm -f "$lock"; return 1; }
  rm -f "$lock"
  docker image inspect "$MKB_TEST_IMAGE" >/dev/null
}
