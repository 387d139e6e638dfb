#!/usr/bin/env bash
# Builds attnkern and runs the whole test suite.
#   scripts/test.sh              Release build with the default compiler (GCC on
#                                Debian) in build-test/
#   scripts/test.sh --sanitize   the same tests built with Clang and its OpenMP
#                                runtime (libomp) under -fsanitize=address,undefined
#                                in build-asan/ (-O1): the second compiler, the
#                                second OpenMP runtime and the sanitizers in one build
#   scripts/test.sh --clang      the same tests built with Clang and libomp in
#                                build-clang/, Release
#   scripts/test.sh --tsan       Clang and libomp under -fsanitize=thread (-O1) in
#                                build-tsan/: the library and tests/concurrency_stress
#                                only (every entry point from many threads while the
#                                settings change), run with libomp's Archer tool so
#                                that ThreadSanitizer sees OpenMP's synchronization
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--clang" || "${1:-}" == "--sanitize" || "${1:-}" == "--tsan" ]]; then
  scripts/install-deps.sh "$1"
else
  scripts/install-deps.sh
fi

jobs=$(nproc 2>/dev/null || echo 2)
if [[ "${1:-}" == "--tsan" ]]; then
  dir=build-tsan
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DAK_SANITIZE=thread -DAK_WERROR=ON >/dev/null
  # The stress test alone: the whole suite under TSan would take CI far too long.
  cmake --build "$dir" -j"$jobs" --target concurrency_stress
  # libomp is not instrumented: Archer, its OMPT tool (in LLVM's lib directory,
  # next to clang), tells TSan about OpenMP's barriers and task dependences;
  # accesses inside the uninstrumented runtime itself are ignored.
  archer="$(dirname "$(readlink -f "$(command -v clang++)")")/../lib/libarcher.so"
  if [[ ! -f "$archer" ]]; then
    echo "test.sh --tsan: no $archer (libomp-dev ships it)" >&2
    exit 1
  fi
  export OMP_TOOL_LIBRARIES="$archer"
  export TSAN_OPTIONS="ignore_noninstrumented_modules=1 halt_on_error=0 second_deadlock_stack=1"
  exec "$dir/tests/concurrency_stress" 30
fi
if [[ "${1:-}" == "--clang" ]]; then
  dir=build-clang
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DAK_WERROR=ON >/dev/null
elif [[ "${1:-}" == "--sanitize" ]]; then
  dir=build-asan
  # Line tables are all that the sanitizers' reports need (file:line of
  # every frame, inlined ones too); full debug info costs a sixth more
  # compile time.
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DAK_SANITIZE=address,undefined -DAK_WERROR=ON >/dev/null
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
  # (The OpenMP runtime's own allocations are not attnkern's: tests/lsan.supp.)
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp"
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
else
  dir=build-test
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DAK_WERROR=ON >/dev/null
fi
cmake --build "$dir" -j"$jobs"
cd "$dir"
exclude=()
# The FetchContent subproject test builds the whole library once more (about
# 4 minutes on 2 cores): the Release run covers it; Clang's run checks the
# library itself with another compiler and OpenMP runtime.
# (Sanitizer builds do not register it, nor the install test.)
[[ "${1:-}" == "--clang" ]] && exclude=(-E '^subproject_consume$')
# Tests run side by side, one per core: an OpenMP worker left spinning after
# its team's last region (libomp spins for 200 ms) would take the core the
# other test needs while its own process computes a float64 reference.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
ctest -j"$jobs" --output-on-failure --timeout 600 "${exclude[@]}"
