#!/usr/bin/env bash
# Cross-compiles attnkern for AArch64 (the NEON kernels) with Debian's
# g++-aarch64-linux-gnu, warning-free, and runs a consumer under qemu-user:
# no Arm machine is needed to see that the NEON path builds and works.
# Not part of CI (the cross toolchain is ~100 MB); run by hand after touching
# src/simd.hpp or the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
for pkg in g++-aarch64-linux-gnu qemu-user; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null; }
done
work=$(mktemp -d)
cat >"$work/toolchain.cmake" <<'TC'
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
TC
xsimd_dir=$(dirname "$(find /usr/lib -name xsimdConfig.cmake | head -1)")
cmake -S . -B "$work/build" -DCMAKE_TOOLCHAIN_FILE="$work/toolchain.cmake" -DAK_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=Release -DAK_WERROR=ON -Dxsimd_DIR="$xsimd_dir" >/dev/null
cmake --build "$work/build" -j"$(nproc)"
aarch64-linux-gnu-gcc -std=c99 capi/examples/c/example.c -Iinclude "$work/build/libattnkern.a" \
  -fopenmp -lstdc++ -lm -o "$work/example"
for isa in neon scalar; do
  AK_ISA=$isa QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64 "$work/example"
done
echo "cross-aarch64: NEON build and example OK"
