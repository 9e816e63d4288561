# Sourced by the set-up scripts: installs the Debian packages d9m builds with, when they are
# missing and we are root; otherwise names what is missing and stops.
D9M_DEBIAN_PACKAGES=(cmake ninja-build g++ pkg-config git python3 ccache
  libsqlite3-dev nlohmann-json3-dev libxxhash-dev libcli11-dev libssl-dev libgtest-dev libbenchmark-dev
  libxml2-utils chromium  # check the JUnit and HTML reports
  clang libclang-rt-14-dev  # libFuzzer
  lld  # links the sanitized executables in a fifth of ld.bfd's time (ci/test.sh)
  python3-torch python3-xxhash python3-numpy  # the PyTorch hook's test (bindings/python, for /usr/bin/python3)
  xz-utils)  # the committed H100 store, unpacked by the schema migration's test

d9m_install_deps() {
  local missing=()
  for p in "${D9M_DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  if [[ $(id -u) != 0 ]]; then
    echo "d9m: missing Debian packages: ${missing[*]}" >&2
    echo "d9m: run as root to install them, or: sudo apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "d9m: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
}

# Header-only NVIDIA libraries newer than the toolkit's, from pinned PyPI wheels: CCCL 3.3 (CUB's
# determinism levels; the CUDA 13.0 toolkit ships CCCL 3.0) and the C++ cuDNN frontend (graph
# API: SDPA, engines and their numerical notes). Only their headers are used. They are unpacked
# once into D9M_WHEEL_DIR (default ~/.cache/d9m/wheels) and passed to CMake by d9m_build.
D9M_WHEELS=(nvidia-cuda-cccl==13.3.3.4.1 nvidia-cudnn-frontend==1.32.0)
# And, the same way but optional (a build goes on without them, and the one test that uses them
# skips): cuobjdump and the nvdisasm it calls, which this toolkit's install lacks, for the test
# that reads what the kernels' atomics compile to (bench/sass_atomics.sh).
D9M_TOOL_WHEELS=(nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37)
D9M_WHEEL_DIR=${D9M_WHEEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/d9m/wheels}

# Unpacks one pinned wheel into D9M_WHEEL_DIR/<name>-<version>, once: a folder that is there
# complete is used as it is (nothing written into it again).
d9m_fetch_wheel() {
  local spec=$1 dir tmp
  dir=$D9M_WHEEL_DIR/${spec/==/-}
  [[ -f $dir/.complete ]] && return 0
  echo "d9m: fetching $spec" >&2
  tmp=$(mktemp -d) || return 1
  # The frontend's wheel also carries Python bindings, so its file names a CPython version
  # and platform; the headers are the same in each, so ask for one explicitly.
  if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$tmp" "$spec" >&2; then
    echo "d9m: could not download $spec from PyPI (pip download failed)" >&2
    rm -rf "$tmp"
    return 1
  fi
  # zipfile keeps no file modes: the tools' bin/ is made executable before the folder is complete.
  rm -rf "$dir.partial" && mkdir -p "$dir.partial" &&
    python3 -m zipfile -e "$tmp"/*.whl "$dir.partial" &&
    { [[ ! -d $dir.partial/nvidia/cu13/bin ]] || chmod +x "$dir.partial"/nvidia/cu13/bin/*; } &&
    touch "$dir.partial/.complete" && rm -rf "$dir" && mv "$dir.partial" "$dir" || { rm -rf "$tmp"; return 1; }
  rm -rf "$tmp"
}

d9m_fetch_wheels() {
  local spec
  for spec in "${D9M_WHEELS[@]}"; do d9m_fetch_wheel "$spec" || return 1; done
  export D9M_CCCL_INCLUDE=$D9M_WHEEL_DIR/nvidia-cuda-cccl-13.3.3.4.1/nvidia/cu13/include/cccl
  export D9M_CUDNN_FRONTEND_INCLUDE=$D9M_WHEEL_DIR/nvidia-cudnn-frontend-1.32.0/include
  D9M_CUOBJDUMP='' D9M_NVDISASM_PATH=''
  for spec in "${D9M_TOOL_WHEELS[@]}"; do
    d9m_fetch_wheel "$spec" || { echo "d9m: going on without $spec (only kernels.sass_atomics needs it; it skips)" >&2; return 0; }
  done
  export D9M_CUOBJDUMP=$D9M_WHEEL_DIR/nvidia-cuda-cuobjdump-13.5.37/nvidia/cu13/bin/cuobjdump
  export D9M_NVDISASM_PATH=$D9M_WHEEL_DIR/nvidia-cuda-nvdisasm-13.5.37/nvidia/cu13/bin
}

# Configures and builds into $1 with the given extra CMake arguments. CUDA is built when nvcc
# is found (D9M_CUDA=AUTO), for the architectures in D9M_CUDA_ARCHITECTURES (default sm_90).
# D9M_BUILD_TARGETS (space-separated) builds only those targets.
d9m_build() {
  local dir=$1
  shift
  local launcher=()
  if command -v ccache > /dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    # One cache for every clone on the machine: paths under the checkout are hashed relative to it
    # and the folder compiled in is not hashed (it only names the debug info's folder), so a fresh
    # clone elsewhere (CI's, after a session built here) hits what the last build compiled. And
    # the translation units that use a precompiled header are cached too (clang's PCH carries its
    # defines and no timestamp; ccache called them uncacheable: 67 of 254 compiles, measured).
    # Measured with a clone of the same commit in another folder: 97 of 104 compiles hit; the
    # harness's unity files miss (CMake writes absolute #include paths into them).
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
    export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
  fi
  [[ -x /usr/local/cuda/bin/nvcc && -z ${CUDACXX:-} ]] && export CUDACXX=/usr/local/cuda/bin/nvcc
  local wheels=()
  if [[ ${D9M_CUDA:-AUTO} != OFF ]] && command -v "${CUDACXX:-nvcc}" > /dev/null; then
    d9m_fetch_wheels || return 1
    wheels=(-DD9M_CCCL_INCLUDE="$D9M_CCCL_INCLUDE" -DD9M_CUDNN_FRONTEND_INCLUDE="$D9M_CUDNN_FRONTEND_INCLUDE"
            -DD9M_CUOBJDUMP="$D9M_CUOBJDUMP" -DD9M_NVDISASM_PATH="$D9M_NVDISASM_PATH")
  fi
  cmake -S . -B "$dir" -G Ninja -DD9M_CUDA="${D9M_CUDA:-AUTO}" \
    -DCMAKE_CUDA_ARCHITECTURES="${D9M_CUDA_ARCHITECTURES:-90}" "${launcher[@]}" "${wheels[@]}" "$@"
  local targets=()
  for t in ${D9M_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
}
