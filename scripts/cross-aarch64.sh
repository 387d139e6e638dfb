#!/usr/bin/env bash
# CI's AArch64 stage: cross-compiles attnkern with Debian's
# g++-aarch64-linux-gnu (warnings as errors), the library at its Release
# flags and the GoogleTest suite (ak_tests, GoogleTest built from Debian's
# sources in /usr/src/googletest), and runs them under qemu-user on the NEON
# and scalar paths: no Arm machine is needed to see that the NEON path builds
# and works. Builds in build-aarch64/.
#
# What runs, and why not everything (CI's whole budget is 30 minutes on 2
# cores, this stage's share about 6; under qemu the kernels run 20 to 80
# times slower than natively):
# - ak_tests' per-instruction-set tests on neon and scalar, less the ones
#   listed in `heavy` below: large sizes, long sweeps and thread-count
#   determinism, which test caches, blocking and threading (the same code
#   on every instruction set, run natively on x86 in the other stages)
#   rather than the NEON arithmetic. Every kernel family keeps its
#   reference comparisons: sgemm (tile, block and depth edges, skinny),
#   softmax (rows and axis), attention (the sampled grid with fewer random
#   cases; f16/bf16 K/V, paged caches, modifiers, split decode), convert,
#   kv store, rope, embedding, exp.
# - the tests that take no instruction set (C API validation, config), once
#   with AK_ISA=neon and once with AK_ISA=scalar, less the ones in
#   `qemu_bound`; isa_env_check and the C example on both sets.
# Not run: the tests that need host tools or a native library (install and
# FetchContent consumers, the Python, Rust and Go bindings and examples,
# the exported-symbol checks, benchmarks); the fuzz replays (each input
# picks its instruction set, and most fall back to scalar here: little NEON
# coverage for their time); and in `qemu_bound`:
# - Config.ReleaseInAChildForkedFromAThreadedParent: qemu 7.2 aborts
#   (qemu_plugin_vcpu_init_hook assertion) when a forked child of a
#   threaded process starts a thread;
# - Config.ReleasingScratchWhileCallsRunIsSafe: thousands of calls, over a
#   minute under qemu; a test of the scratch bookkeeping, not of NEON;
# - AttentionGridCoverage: it counts the attention grid's cases, fewer here.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --aarch64
t_deps=$SECONDS
dir=build-aarch64
jobs=$(nproc 2>/dev/null || echo 2)
t0=$SECONDS

mkdir -p "$dir"
cat >"$dir/toolchain.cmake" <<'TC'
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
TC
# xsimd is header-only: the host's package serves. The tests at -O1 (the
# library keeps its Release flags): they compile in about 40 % less time.
xsimd_dir=$(dirname "$(find /usr/lib /usr/share -name xsimdConfig.cmake | head -1)")
cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$PWD/$dir/toolchain.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DAK_WERROR=ON -Dxsimd_DIR="$xsimd_dir" -DAK_GTEST_SOURCE_DIR=/usr/src/googletest \
  -DAK_TEST_COMPILE_OPTIONS=-O1 >/dev/null
cmake --build "$dir" -j"$jobs" --target ak_tests isa_env_check ak_example_c
t_build=$((SECONDS - t0))

export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
# OpenMP threads that wait by spinning spin emulated instructions.
export OMP_WAIT_POLICY=passive
# The attention grid's forced cases and 16 random ones (natively: 240;
# AttentionGridCoverage, which counts them, is left out below).
export AK_TEST_GRID_RANDOM=16

# gtest filters, ':'-separated (see the header for why each is left out).
heavy='Isa/Determinism.*:Isa/AttentionDeterminism.*:Isa/*.Large*'
heavy+=':Isa/*.AliasedRowStrides/*:Isa/*.DeterministicAcrossThreadsAndCalls/*:Isa/AttentionLongKv.*'
heavy+=':Isa/SgemmBlocking.SecondTileEdges/*:Isa/Softmax.AxisMatchesReference/*'
heavy+=':Isa/Softmax.AxisStreamedExponentialsSameBits/*:Isa/Softmax.RowsGuessConfirmedOrRedone/*'
heavy+=':PerIsa/VexpTest.WithinTwoUlpOverTheWholeRange/*:PerIsa/VexpTest.UnshiftedWithinTwoUlpOverItsRange/*'
qemu_bound='Config.ReleaseInAChildForkedFromAThreadedParent:Config.ReleasingScratchWhileCallsRunIsSafe'
qemu_bound+=':AttentionGridCoverage.*'

# One ak_tests run in two shards, a process each (most tests run on one
# thread); the logs are printed when one fails.
run_sharded() {
  local isa=$1 filter=$2 rc=0 pids=() i
  for i in 0 1; do
    AK_ISA=$isa GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i qemu-aarch64 "$dir/tests/ak_tests" \
      --gtest_filter="$filter" --gtest_brief=1 >"$dir/ak_tests.$isa.$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1; do
    wait "${pids[$i]}" || rc=1
    grep -E '^\[ *(=+|PASSED|FAILED) *\]' "$dir/ak_tests.$isa.$i.log" || true
  done
  if ((rc != 0)); then
    cat "$dir/ak_tests.$isa.0.log" "$dir/ak_tests.$isa.1.log"
    echo "cross-aarch64: ak_tests failed under qemu (AK_ISA=$isa)" >&2
    exit 1
  fi
}

t1=$SECONDS
# On AArch64 the per-instruction-set tests are instantiated for neon and
# scalar only: this run covers both, and the rest on neon.
echo "-- ak_tests, AK_ISA=neon"
run_sharded neon "-$heavy:$qemu_bound"
echo "-- ak_tests that take no instruction set, AK_ISA=scalar"
run_sharded scalar "-Isa/*:PerIsa/*:$qemu_bound"
for isa in neon scalar; do
  AK_ISA=$isa qemu-aarch64 "$dir/tests/examples/ak_example_c" >/dev/null
  AK_ISA=$isa qemu-aarch64 "$dir/tests/isa_env_check" "$isa"
done
AK_ISA=avx9000 qemu-aarch64 "$dir/tests/isa_env_check" best
t_run=$((SECONDS - t1))
echo "cross-aarch64: NEON build and tests OK (deps ${t_deps} s, build ${t_build} s, qemu runs ${t_run} s)"
