#!/usr/bin/env bash
# Coverage-guided differential fuzzing of the C API against the float64
# references (tests/fuzz/fuzz_<target>.cpp), with Clang's libFuzzer, ASan and
# UBSan.
#
#   scripts/fuzz.sh TARGET [SECONDS] [libFuzzer arguments...]
#
# TARGET is attention, softmax, sgemm, kv_store or rope; SECONDS (default 300) the time of
# each of the jobs (one per core). The working corpus grows in
# build-fuzz/corpus-TARGET (not committed), seeded from the committed one,
# tests/fuzz/corpus/TARGET.txt (one input per line, in hex), which ctest
# replays (fuzz_TARGET_replay). A failing input is written to build-fuzz/ as
# crash-*; with the fix, add it to the committed corpus:
#
#   scripts/fuzz.sh --hex build-fuzz/crash-... >> tests/fuzz/corpus/TARGET.txt
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${AK_FUZZ_BUILD_DIR:-$root/build-fuzz}"
build="$(mkdir -p "$build" && cd "$build" && pwd)" # absolute: the run below cds into it

if [ "${1:-}" = "--hex" ]; then # an input file as one corpus line
  python3 -c 'import sys; print(open(sys.argv[1], "rb").read().hex())' "${2:?usage: scripts/fuzz.sh --hex FILE}"
  exit 0
fi
target="${1:?usage: scripts/fuzz.sh attention|softmax|sgemm|kv_store|rope [SECONDS] [libFuzzer args...]}"
shift
case "$target" in
  attention) reference=reference_attention.cpp ;;
  softmax | sgemm | kv_store | rope) reference=reference.cpp ;;
  *) echo "unknown target: $target" >&2; exit 2 ;;
esac
seconds="${1:-300}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "SECONDS must be a whole number, not '$seconds' (libFuzzer arguments come after it)" >&2
  exit 2
fi
if [ "$#" -gt 0 ]; then shift; fi

"$root/scripts/install-deps.sh" --fuzz

flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -g -O1"
if [ ! -f "$build/lib/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build/lib" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DAK_BUILD_TESTS=OFF -DCMAKE_CXX_FLAGS="$flags -fsanitize=fuzzer-no-link" \
    -DCMAKE_C_FLAGS="$flags"
fi
cmake --build "$build/lib" --target attnkern_static -j "$(nproc)"

# shellcheck disable=SC2086
clang++ -std=c++17 $flags -fsanitize=fuzzer -fopenmp -I"$root/include" -I"$root/tests" \
  "$root/tests/fuzz/fuzz_$target.cpp" "$root/tests/$reference" "$build/lib/libattnkern.a" \
  -o "$build/fuzz_$target"

# The committed corpus, one file per line, as the first seeds.
corpus="$build/corpus-$target"
mkdir -p "$corpus"
python3 - "$root/tests/fuzz/corpus/$target.txt" "$corpus" <<'EOF'
import hashlib, os, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if line and not line.startswith("#"):
        data = bytes.fromhex(line)
        with open(os.path.join(sys.argv[2], hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)
EOF

cd "$build"
jobs="$(nproc)"
"./fuzz_$target" -max_total_time="$seconds" -jobs="$jobs" -workers="$jobs" -max_len=256 \
  -len_control=0 -timeout=30 -rss_limit_mb=4096 "$@" "$corpus"
