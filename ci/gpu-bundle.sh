#!/usr/bin/env bash
# Packs what ci/gpu-audit.sh runs into a small folder that can travel to a machine with a GPU
# but without this machine's packages (the lent H100/H200 has no apt and no network): the five
# binaries and the PyTorch hook's device-digest library in the layout gpu-audit.sh expects, plus the shared libraries they need that are not
# part of the C/C++ runtime, the CUDA driver, cuDNN, cuBLAS or cuSPARSE (those the GPU machine
# must provide; the CUDA runtime is linked statically).
#
#   ci/gpu-bundle.sh BUILD DEST      e.g. ci/gpu-bundle.sh build-cuda build-gpu-bundle
#   then there:  D9M_BUILD_DIR=DEST ci/gpu-audit.sh "$OUT"
set -euo pipefail
build=${1:?usage: ci/gpu-bundle.sh BUILD DEST}
dest=${2:?usage: ci/gpu-bundle.sh BUILD DEST}
bins=(harness/d9m suites/d9m_gpu_tests suites/d9m_unit_tests suites/d9m_with_faults bench/d9m_bench bindings/libd9m_device_digest.so)
# DEST is emptied first: refuse anything that is not a folder of its own.
if [[ -e $dest ]]; then
  real_dest=$(realpath "$dest")
  for keep in "$(realpath "$build")" "$(realpath .)" / "$HOME"; do
    [[ $real_dest == "$keep" ]] && { echo "gpu-bundle: refusing to empty $dest" >&2; exit 1; }
  done
fi
rm -rf "$dest"
mkdir -p "$dest/lib"
for b in "${bins[@]}"; do
  [[ -x $build/$b ]] || { echo "gpu-bundle: $build/$b is missing (configure with -DD9M_TESTS=ON -DD9M_BENCH=ON)" >&2; exit 1; }
  mkdir -p "$dest/$(dirname "$b")"
  cp "$build/$b" "$dest/$b"
  strip --strip-debug "$dest/$b"
done
# Every resolved dependency except glibc's own libraries, the C++ runtime, and the GPU stack.
skip='^(libc|libm|libmvec|libdl|librt|libpthread|libresolv|libutil|libanl|libnss_.*|libstdc\+\+|libgcc_s|ld-linux.*|libcuda|libcudnn.*|libcublas.*|libcusparse.*|libnvidia.*)\.so'
deps=$(for b in "${bins[@]}"; do ldd "$dest/$b"; done)
# A dependency the loader cannot find here would be missing there too, silently: stop instead.
missing=$(awk '$2 == "=>" && $3 == "not" {print $1}' <<< "$deps" | sort -u | grep -Ev "$skip" || true)
if [[ -n $missing ]]; then
  echo "gpu-bundle: the loader finds no $(echo $missing): set LD_LIBRARY_PATH or install them" >&2
  exit 1
fi
awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<< "$deps" | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] && continue
  cp -L "$path" "$dest/lib/$name"
done
echo "gpu-bundle: $(du -sh "$dest" | cut -f1) in $dest; libraries: $(ls "$dest/lib" | tr '\n' ' ')"
