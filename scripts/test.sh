#!/usr/bin/env bash
# Builds attnkern and runs the whole test suite.
#   scripts/test.sh              Release build in build-test/
#   scripts/test.sh --sanitize   the same tests with -fsanitize=address,undefined
#                                in build-asan/ (Debug-level checks, -O1)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
if [[ "${1:-}" == "--sanitize" ]]; then
  dir=build-asan
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DAK_SANITIZE=address,undefined -DAK_WERROR=ON >/dev/null
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
else
  dir=build-test
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DAK_WERROR=ON >/dev/null
fi
cmake --build "$dir" -j"$jobs"
cd "$dir"
ctest -j"$jobs" --output-on-failure --timeout 600
