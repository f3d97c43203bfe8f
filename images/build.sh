#!/usr/bin/env bash
# Build an aka container image from this checkout (see images/README.md).
#
#   images/build.sh ci   [TAG]   CPU image for CI, built offline        (default tag aka-ci:latest)
#   images/build.sh cuda [TAG]   NVIDIA: CUDA, PyTorch, Triton, aka     (default tag aka-cuda:latest)
#   images/build.sh rocm [TAG]   AMD: ROCm PyTorch, Triton, aka         (default tag aka-rocm:latest)
#
# aka-core and the plugins under plugins/aka-* go into the image as wheels built from this
# checkout, so the image runs the same aka as the host (rebuild it after changing aka).
#
# Environment:
#   PYTHON              host interpreter that builds the wheels (default python3)
#   DOCKER_BUILD_ARGS   more arguments for `docker build`, e.g. "--network host --build-arg X=Y"
#   AKA_IMAGE_EXCLUDE   plugin folders left out of the image (default: aka-executor-docker)
#   AKA_CI_SUITE        Debian suite of the CI base image (default bookworm)
#   AKA_CI_MIRROR       Debian mirror for debootstrap (default: the host's apt source)
#   AKA_CI_REBUILD_BASE=1  make the CI base image again even when it exists
set -euo pipefail

kind="${1:-}"
case "$kind" in
  ci | cuda | rocm) ;;
  *) echo "usage: $0 ci|cuda|rocm [TAG]" >&2; exit 2 ;;
esac
repo="$(cd "$(dirname "$0")/.." && pwd)"
tag="${2:-aka-$kind:latest}"
python_bin="${PYTHON:-python3}"
exclude=" ${AKA_IMAGE_EXCLUDE:-aka-executor-docker} "
started=$SECONDS

say() { printf '[images/build.sh %4ss] %s\n' "$((SECONDS - started))" "$*" >&2; }
die() { echo "images/build.sh: error: $*" >&2; exit 1; }

command -v docker > /dev/null || die "the docker CLI is not installed (Debian: apt-get install docker.io)"
docker info > /dev/null 2>&1 || die "cannot reach the docker engine (${DOCKER_HOST:-unix:///var/run/docker.sock}): start dockerd, or run scripts/ci/docker-setup.sh"

context="$(mktemp -d "${TMPDIR:-/tmp}/aka-image.XXXXXX")"
trap 'rm -rf "$context"' EXIT
cp "$repo/images/$kind/"* "$context/"
mkdir -p "$context/wheels/aka" "$context/wheels/deps"

projects=("$repo")
for plugin in "$repo"/plugins/aka-*/; do
  name="$(basename "$plugin")"
  [[ "$exclude" == *" $name "* ]] || projects+=("${plugin%/}")
done

# --------------------------------------------------------------------------- CI base image
# A Debian rootfs from debootstrap, imported as an image: no registry is needed.
host_debian_mirror() {
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources
  elif [ -f /etc/apt/sources.list ]; then
    awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit } }' \
      /etc/apt/sources.list
  fi
}

build_ci_base() {
  local base="$1" suite="$2"
  command -v debootstrap > /dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  [ "$(id -u)" = 0 ] || die "debootstrap needs root to make the CI base image"
  local rootfs mirror
  rootfs="$(mktemp -d "${TMPDIR:-/tmp}/aka-rootfs.XXXXXX")"
  mirror="${AKA_CI_MIRROR:-$(host_debian_mirror || true)}"
  say "debootstrap $suite into $rootfs${mirror:+ from $mirror}"
  if ! debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      "$suite" "$rootfs" ${mirror:+"$mirror"} > "$context/debootstrap.log" 2>&1; then
    tail -n 30 "$context/debootstrap.log" >&2
    rm -rf "$rootfs"
    die "debootstrap failed (log above)"
  fi
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  say "importing the rootfs as $base"
  tar -C "$rootfs" -c . | docker import -c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' - "$base" > /dev/null
  rm -rf "$rootfs"
}

# Reading and building aka's own projects needs hatchling: the host's when it has one.
isolation=()
if "$python_bin" -c "import hatchling" 2> /dev/null; then
  isolation=(--no-build-isolation)
fi

build_args=()
if [ "$kind" = ci ]; then
  suite="${AKA_CI_SUITE:-bookworm}"
  base="aka-ci-base:$suite"
  if [ -n "${AKA_CI_REBUILD_BASE:-}" ] || ! docker image inspect "$base" > /dev/null 2>&1; then
    build_ci_base "$base" "$suite"
  else
    say "base image $base exists (AKA_CI_REBUILD_BASE=1 makes it again)"
  fi
  pyver="$(docker run --rm --network none "$base" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  machine="$(docker run --rm --network none "$base" uname -m)"
  platforms=(--platform "manylinux2014_$machine")
  for minor in 17 24 27 28 31 34 35 36; do
    platforms+=(--platform "manylinux_2_${minor}_$machine")
  done
  # Every third-party wheel for the image's Python, resolved on the host (the build is offline).
  say "downloading wheels for Python $pyver ($machine): images/ci/requirements.txt and aka's dependencies"
  "$python_bin" -m pip download -q --disable-pip-version-check -d "$context/wheels/deps" \
    --only-binary=:all: --implementation cp --python-version "$pyver" "${platforms[@]}" "${isolation[@]}" \
    -r "$repo/images/ci/requirements.txt" "${projects[@]}" 2>&1 | grep -v "is ignored" >&2 || true
  ls "$context"/wheels/deps/torch-*.whl > /dev/null 2>&1 || die "pip download did not fetch torch"
  build_args+=(--network none --build-arg "BASE=$base")
fi

# --------------------------------------------------------------------------- aka wheels
say "building wheels of aka-core and $((${#projects[@]} - 1)) plugins"
"$python_bin" -m pip wheel -q --disable-pip-version-check --no-deps "${isolation[@]}" \
  -w "$context/wheels/aka" "${projects[@]}" 2>&1 | grep -v "is ignored" >&2 || true
count="$(find "$context/wheels/aka" -name '*.whl' | wc -l)"
[ "$count" -eq "${#projects[@]}" ] || die "built $count wheels for ${#projects[@]} projects"

# --------------------------------------------------------------------------- image
say "docker build -t $tag ($(du -sh "$context" | cut -f1) of context)"
# shellcheck disable=SC2086  # DOCKER_BUILD_ARGS is split on purpose
if ! DOCKER_BUILDKIT=0 docker build -t "$tag" "${build_args[@]}" ${DOCKER_BUILD_ARGS:-} "$context" \
    > "$context/build.log" 2>&1; then
  tail -n 40 "$context/build.log" >&2
  die "docker build failed (log above)"
fi
say "built $tag"
