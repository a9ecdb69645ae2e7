#!/usr/bin/env bash
# Installs what the suite needs on Debian (bookworm), only what is missing; safe to run again.
# C/C++ dependencies and the Python test dependencies that Debian has come from apt; anything
# else Python needs goes into .venv/ (made only when scripts/requirements-venv.txt lists something).
# The CUDA toolkit is not installed here: CMake uses /usr/local/cuda when it exists (PRETRAIN_CUDA=AUTO).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config git
  libhdf5-dev libicu-dev libsentencepiece-dev sentencepiece libtbb-dev
  libzstd-dev zstd libbz2-dev bzip2 lbzip2 pbzip2 zlib1g-dev libdeflate-dev libisal-dev libexpat1-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev libxxhash-dev pybind11-dev
  python3 python3-dev python3-venv python3-numpy python3-h5py python3-torch python3-matplotlib
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup_deps: installing ${#missing[@]} Debian package(s): ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp -t setup_deps-apt.XXXXXX.log)
  if ! { $sudo apt-get update -qq && \
         $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "setup_deps: apt-get failed (full log: $log)" >&2
    exit 1
  fi
  echo "setup_deps: installed (log: $log)"
else
  echo "setup_deps: all ${#packages[@]} Debian packages present"
fi

# Python packages Debian does not have, for the compatibility checks and benchmarks.
req=scripts/requirements-venv.txt
if [[ -s $req ]] && grep -qv '^\s*#' "$req"; then
  if [[ ! -x .venv/bin/python ]]; then
    echo "setup_deps: creating .venv (with Debian's site packages: numpy, h5py, torch)"
    /usr/bin/python3 -m venv --system-site-packages .venv
  fi
  stamp=.venv/.requirements.sha
  want=$(sha256sum "$req" | cut -c1-64)
  if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    echo "setup_deps: pip install -r $req into .venv"
    .venv/bin/python -m pip install -q -r "$req"
    echo "$want" > "$stamp"
  else
    echo "setup_deps: .venv up to date"
  fi
  nodeps=scripts/requirements-venv-nodeps.txt
  stamp=.venv/.requirements-nodeps.sha
  want=$(sha256sum "$nodeps" | cut -c1-64)
  if [[ -s $nodeps && ( ! -f $stamp || $(cat "$stamp") != "$want" ) ]]; then
    echo "setup_deps: pip install --no-deps -r $nodeps into .venv"
    .venv/bin/python -m pip install -q --no-deps -r "$nodeps"
    echo "$want" > "$stamp"
  fi
  # The build backend of `pip install .` as wheels, pinned and offline: pip install --no-index
  # --find-links .venv/wheelhouse . (--no-deps: the file pins every wheel the backend needs).
  build_req=scripts/requirements-venv-build.txt
  stamp=.venv/wheelhouse/.requirements.sha
  want=$(sha256sum "$build_req" | cut -c1-64)
  if [[ -s $build_req && ( ! -f $stamp || $(cat "$stamp") != "$want" ) ]]; then
    echo "setup_deps: pip download -r $build_req into .venv/wheelhouse"
    rm -rf .venv/wheelhouse
    .venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d .venv/wheelhouse -r "$build_req"
    echo "$want" > "$stamp"
  fi
fi

if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup_deps: CUDA toolkit found at /usr/local/cuda (the CUDA backend will be built)"
  # cudnn-frontend (NVIDIA's header-only C++ API to cuDNN's fused attention) from its PyPI wheel,
  # headers only, into .venv/cudnn-frontend/include, where CMake looks (cmake/PretrainDependencies.cmake).
  # The wheel's Python module is not installed: any CPython wheel of the version carries the same headers.
  frontend=nvidia-cudnn-frontend==1.32.0
  stamp=.venv/cudnn-frontend/.version
  if [[ ! -f $stamp || $(cat "$stamp") != "$frontend" ]]; then
    echo "setup_deps: $frontend headers into .venv/cudnn-frontend"
    tmp=$(mktemp -d -t setup_deps-cudnn-frontend.XXXXXX)
    /usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "$frontend"
    rm -rf .venv/cudnn-frontend
    mkdir -p .venv/cudnn-frontend
    /usr/bin/python3 - "$tmp" .venv/cudnn-frontend <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/nvidia_cudnn_frontend-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
    rm -rf "$tmp"
    echo "$frontend" > "$stamp"
  fi
else
  echo "setup_deps: no CUDA toolkit at /usr/local/cuda (CPU-only build)"
fi
