# Sourced by the set-up scripts: installs the Debian packages d9m builds with, when they are
# missing and we are root; otherwise names what is missing and stops.
D9M_DEBIAN_PACKAGES=(cmake ninja-build g++ pkg-config git python3 ccache
  libsqlite3-dev nlohmann-json3-dev libxxhash-dev libcli11-dev libssl-dev libgtest-dev libbenchmark-dev
  libxml2-utils chromium  # check the JUnit and HTML reports
  clang libclang-rt-14-dev)  # libFuzzer

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

# Configures and builds into $1 with the given extra CMake arguments. CUDA is built when nvcc
# is found (D9M_CUDA=AUTO), for the architectures in D9M_CUDA_ARCHITECTURES (default sm_90).
# D9M_BUILD_TARGETS (space-separated) builds only those targets.
d9m_build() {
  local dir=$1
  shift
  local launcher=()
  if command -v ccache > /dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  [[ -x /usr/local/cuda/bin/nvcc && -z ${CUDACXX:-} ]] && export CUDACXX=/usr/local/cuda/bin/nvcc
  cmake -S . -B "$dir" -G Ninja -DD9M_CUDA="${D9M_CUDA:-AUTO}" \
    -DCMAKE_CUDA_ARCHITECTURES="${D9M_CUDA_ARCHITECTURES:-90}" "${launcher[@]}" "$@"
  local targets=()
  for t in ${D9M_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
}
