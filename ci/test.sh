#!/usr/bin/env bash
# Runs d9m's tests on a fresh machine: installs what is missing (as root), configures, builds,
# and runs ctest: unit tests, CLI tests, and one certification test per catalogued case (GPU
# cases report a skip without a device). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ci/deps.sh
d9m_install_deps
build=${D9M_BUILD_DIR:-build/test}
d9m_build "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DD9M_TESTS=ON -DD9M_BENCH=ON  # benchmarks are built, so they cannot rot
ctest --test-dir "$build" -j "$(nproc)" --output-on-failure "$@"
