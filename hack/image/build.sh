#!/usr/bin/env bash
# Build netsched's image from the Dockerfile with buildah: no Docker engine, no registry.
#
# `FROM python:3.11-slim` needs that image in buildah's storage. Where no registry serves it,
# this script makes a stand-in first: a minimal Debian bookworm rootfs with Python 3.11
# (mmdebstrap), laid out like the official image (/usr/local/bin/python), committed as
# docker.io/library/python:3.11-slim. The rootfs tarball is cached outside git, keyed by its
# recipe, so a warm run skips it. Then `buildah bud` builds the Dockerfile unmodified and
# tags it netsched:<package version>.
#
#   hack/image/build.sh              # base (if missing) + netsched:<version>; prints the image name last
#   hack/image/build.sh --archive    # also writes a docker-archive tarball (for `ctr images import`)
#                                    # and prints its path last
#   hack/image/build.sh --train      # the -train image instead (Dockerfile target `train`, for retrain)
# Environment: NETSCHED_CACHE (default ~/.cache/netsched), NETSCHED_IMAGE (default netsched:<version>).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
step() { echo "[image] $*" >&2; }
die() { echo "[image] error: $*" >&2; exit 1; }

archive=false target=serving suffix=
for arg in "$@"; do
  case "$arg" in
    --archive) archive=true ;;
    --train) target=train suffix=-train ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $arg (see --help)" ;;
  esac
done

# Prerequisites, each with the command that provides it.
[[ $(id -u) == 0 ]] || die "needs root (buildah's storage in /var/lib/containers, mmdebstrap's chroot); run it as root"
missing=()
for tool in buildah mmdebstrap runc; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
((${#missing[@]} == 0)) || die "missing ${missing[*]}: apt-get install -y ${missing[*]}"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || \
  die "the kernel has no overlay filesystem (buildah's storage driver needs it): modprobe overlay"
# buildah picks crun when both are installed; crun fails on a cgroup v1 hybrid layout.
runtime="$(command -v runc)"

cache="${NETSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netsched}/image"
mkdir -p "$cache"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/pyproject.toml" | head -n1)"
[[ -n $version ]] || die "no version = \"...\" line in $root/pyproject.toml"
image="${NETSCHED_IMAGE:-netsched:$version}$suffix"
base=docker.io/library/python:3.11-slim
start=$SECONDS

# --- The base image -----------------------------------------------------------------------
suite=bookworm
packages=python3,python3-venv,ca-certificates,netbase,tzdata,passwd,usr-is-merged
mirrors=("deb http://deb.debian.org/debian $suite main"
         "deb http://deb.debian.org/debian $suite-updates main"
         "deb http://deb.debian.org/debian-security $suite-security main")
# Documentation, manuals and translations: nothing in the image reads them.
dpkgopts=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
          --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
          --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias'
          --dpkgopt='path-exclude=/usr/share/lintian/*')
# The official image's layout: python and python3 in /usr/local/bin, pip not blocked by PEP 668
# (the Dockerfile installs into a venv, which it never is, but a derived image may not).
hook='ln -sf /usr/bin/python3.11 "$1/usr/local/bin/python3" && ln -sf python3 "$1/usr/local/bin/python"'
hook+=' && rm -f "$1"/usr/lib/python3.11/EXTERNALLY-MANAGED'
# mmdebstrap merges /usr with the usrmerge package, which pulls in perl (45 MB); once merged,
# usr-is-merged (included) stands for it.
hook+=' && chroot "$1" dpkg --purge usrmerge libfile-find-rule-perl libnumber-compare-perl libtext-glob-perl'
hook+=' perl libperl5.36 perl-modules-5.36'
hook+=' && rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/* "$1"/var/cache/ldconfig/*'
key="$(printf '%s\n' "$suite" "$packages" "${mirrors[@]}" "${dpkgopts[@]}" "$hook" | sha256sum | cut -c1-12)"
label=io.netsched.base-recipe

have="$(buildah inspect --type image --format "{{index .OCIv1.Config.Labels \"$label\"}}" "$base" 2>/dev/null || echo missing)"
if [[ $have == "$key" ]]; then
  step "base $base: built from this recipe ($key), kept"
elif [[ -z $have ]]; then
  # An image of that name this script did not build (a real one, pulled or loaded): use it.
  step "base $base: present and not built here; using it as it is"
else
  tarball="$cache/base-$suite-$key.tar"
  if [[ ! -s $tarball ]]; then
    step "base: mmdebstrap $suite minbase + $packages (cold: ~1 min)"
    t=$SECONDS
    rm -rf "$tarball.tmp"
    mmdebstrap --variant=minbase --format=tar --include="$packages" "${dpkgopts[@]}" \
      --customize-hook="$hook" "$suite" "$tarball.tmp" "${mirrors[@]}" >&2 \
      || { rm -rf "$tarball.tmp"; die "mmdebstrap failed (above); are the Debian mirrors reachable?"; }
    mv "$tarball.tmp" "$tarball"
    step "base: rootfs $(du -sm "$tarball" | cut -f1) MB in $((SECONDS - t)) s, cached in $tarball"
  else
    step "base: rootfs cached in $tarball"
  fi
  step "base: committing $base"
  t=$SECONDS
  ctr="$(buildah from --pull=never scratch)"
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  buildah add --quiet "$ctr" "$tarball" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 --label "$label=$key" "$ctr"
  buildah commit --quiet --rm "$ctr" "$base" >/dev/null
  trap - EXIT
  step "base: committed in $((SECONDS - t)) s"
fi

# --- netsched's image -----------------------------------------------------------------------
# pip in the build must trust the same CA bundle and use the same index settings as this
# machine (a TLS-intercepting proxy, a mirror): both read-only into every RUN.
volumes=()
for f in /etc/ssl/certs/ca-certificates.crt /etc/pip.conf; do
  [[ -f $f ]] && volumes+=(--volume "$f:$f:ro")
done
step "building $image from $root/Dockerfile (cold: ~1 min; layers cached by buildah)"
t=$SECONDS
buildah bud --runtime "$runtime" --pull=never --network host --layers --format docker \
  "${volumes[@]}" --target "$target" --tag "$image" "$root" >&2 || die "buildah bud failed (above)"
step "built $image in $((SECONDS - t)) s, $(buildah images --format '{{.Size}}' "$image" | head -n1)"

# Every component's code imports in the image, as the image's user, the default model predicts
# (serving must not need a training dependency), CP-SAT solves, the stripped extension modules
# load; `netsched --version` is timed.
t=$SECONDS
ctr="$(buildah from --pull=never "$image")"
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
check='import netsched.cli, netsched.extender.server, netsched.operator.manager, netsched.telemetry.agent
import netsched.packing.solver
from netsched.models.predictor import Predictor
p = Predictor.load("/opt/netsched/models/current.json")
import numpy as np
assert np.isfinite(p.predict(np.full((2, len(p.features)), np.nan))).all()
from ortools.sat.python import cp_model
m = cp_model.CpModel(); x = m.new_int_var(0, 3, "x"); m.maximize(x)
assert cp_model.CpSolver().solve(m) == cp_model.OPTIMAL
import aiohttp, uvloop, yaml
uvloop.new_event_loop().close(); yaml.load("a: 1", Loader=yaml.CSafeLoader)
print("[image] check: components import, CP-SAT solves, default model", p.path.name,
      "predicts, served by", type(p.served).__name__)'
buildah run --runtime "$runtime" --network none "$ctr" -- python -c "$check" >&2 \
  || die "$image: a component does not import, or the default model does not load (above)"
for sub in extender operator agent; do
  buildah run --runtime "$runtime" --network none "$ctr" -- netsched "$sub" --help >/dev/null \
    || die "$image: netsched $sub --help fails"
done
# Past argument parsing, up to the first API call: fails on the missing kubeconfig, not on an import.
for sub in extender operator; do
  out="$(buildah run --runtime "$runtime" --network none "$ctr" -- \
    netsched "$sub" --kubeconfig=/nonexistent 2>&1 || true)"
  if grep -q -E 'ModuleNotFoundError|ImportError' <<<"$out"; then
    die "$image: netsched $sub cannot import what it needs: $(grep -E 'ModuleNotFoundError|ImportError' <<<"$out")"
  fi
done
buildah run --runtime "$runtime" --network none "$ctr" -- sh -c \
  'start=$(date +%s%N); netsched --version >/dev/null; echo "[image] check: netsched --version in $((($(date +%s%N) - start) / 1000000)) ms"' >&2
buildah rm "$ctr" >/dev/null
trap - EXIT
step "checked in $((SECONDS - t)) s"

if $archive; then
  out="$cache/${image//[:\/]/_}.tar"
  t=$SECONDS
  rm -f "$out"
  buildah push --quiet "$image" "docker-archive:$out:docker.io/library/$image" >/dev/null
  step "archive $out ($(du -m "$out" | cut -f1) MB) in $((SECONDS - t)) s"
  step "done in $((SECONDS - start)) s"
  echo "$out"
else
  step "done in $((SECONDS - start)) s"
  echo "$image"
fi
