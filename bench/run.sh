#!/usr/bin/env bash
# The main job: install missing packages, build ak_bench (Release) if needed, run every comparison with
# repetitions, then print the Markdown tables and draw the SGEMM and attention prefill charts
# (PNG, gnuplot).
#
#   bench/run.sh [FILTER] [extra ak_bench arguments...]
#
#   FILTER   a --benchmark_filter regex, e.g. 'sgemm/.*/nn_', 'softmax' or
#            'attention|decode|membw'
#            ('' or 'all' runs everything)
#
# Environment:
#   AK_BENCH_REPETITIONS  repetitions per benchmark (default 3; the median is reported)
#   AK_BENCH_THREADS      thread counts, a comma list (default 1,2; e.g. 1,4,16)
#   AK_BENCH_INTERLEAVE   1 (default): run the repetitions of all benchmarks in random
#                         order, so a burst of load from elsewhere hits every
#                         implementation alike; 0: each benchmark's repetitions back to back
#   AK_BENCH_BUILD_DIR    build directory (default <repo>/build-bench)
#   AK_BENCH_OUT          JSON output path (default <build>/bench-results/ak_bench-<time>.json;
#                         the Markdown goes next to it, same name with .md, the SGEMM
#                         chart as <name>-sgemm.png and the attention prefill chart as
#                         <name>-attention.png)
#   AK_BENCH_CHART_OUT    also copy the SGEMM chart there (e.g. bench/sgemm.png, for committing)
#   AK_BENCH_ATTENTION_CHART_OUT  also copy the attention prefill chart (GFLOP/s against L)
#                         there (e.g. bench/attention.png)
#   AK_BENCH_OPENBLAS_CORETYPE  pin an OpenBLAS core (e.g. Haswell); by default the
#                         binary removes a preset OPENBLAS_CORETYPE and lets OpenBLAS detect
#   AK_BENCH_TOLERANCE    agreement tolerance of the correctness check (default 1e-4)
#   AK_BENCH_HUGEPAGES    0: large buffers on 4 KiB pages (default: buffers of 4 MiB and more are
#                         2 MiB-aligned and advised as transparent huge pages, bench/README.md)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
build="${AK_BENCH_BUILD_DIR:-$root/build-bench}"
reps="${AK_BENCH_REPETITIONS:-3}"
interleave="${AK_BENCH_INTERLEAVE:-1}"
filter="${1:-}"
if [ "$#" -gt 0 ]; then shift; fi
[ "$filter" = "all" ] && filter=""

# Install whatever Debian packages are missing (the peers included).
"$root/scripts/install-deps.sh" --bench

# Configure once; build every time (a no-op when up to date, and never a stale binary).
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DAK_BUILD_BENCH=ON -DAK_BUILD_TESTS=OFF
fi
cmake --build "$build" --target ak_bench -j "$(nproc)"

out="${AK_BENCH_OUT:-$build/bench-results/ak_bench-$(date +%Y%m%d-%H%M%S).json}"
mkdir -p "$(dirname "$out")"
md="${out%.json}.md"

args=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true
      --benchmark_out="$out" --benchmark_out_format=json)
[ -n "$filter" ] && args+=(--benchmark_filter="$filter")
[ "$interleave" = "1" ] && args+=(--benchmark_enable_random_interleaving=true)

# The machine is shared: say so when something else is using it right now
# (CPU busy over one second, from /proc/stat).
cpu_busy() {
  local a b a1 a2 a3 a4 a5 a6 a7 a8 b1 b2 b3 b4 b5 b6 b7 b8
  read -r _ a1 a2 a3 a4 a5 a6 a7 a8 _ < /proc/stat
  sleep 1
  read -r _ b1 b2 b3 b4 b5 b6 b7 b8 _ < /proc/stat
  a=$((b1 + b2 + b3 + b4 + b5 + b6 + b7 + b8 - a1 - a2 - a3 - a4 - a5 - a6 - a7 - a8))
  b=$((b4 + b5 - a4 - a5))  # idle + iowait
  echo $(( a > 0 ? 100 * (a - b) / a : 0 ))
}
# More cores than the default thread counts (1 and 2) use: say how to measure them.
cores=$(nproc 2>/dev/null || echo 1)
if [ -z "${AK_BENCH_THREADS:-}" ] && [ "$cores" -gt 2 ]; then
  counts="1"; t=2
  while [ "$t" -lt "$cores" ]; do counts="$counts,$t"; t=$((t * 2)); done
  echo "== note: $cores CPUs, benchmarks run at 1 and 2 threads; AK_BENCH_THREADS=$counts,$cores measures more" >&2
fi

busy=$(cpu_busy 2>/dev/null || echo 0)
if [ "$busy" -gt 20 ]; then
  echo "== warning: the CPUs were ${busy}% busy before the run; numbers (2-thread ones most) will be noisy" >&2
fi

echo "== $build/bench/ak_bench ${args[*]} $*" >&2
start=$(date +%s)
"$build/bench/ak_bench" "${args[@]}" "$@"
echo "== ak_bench took $(( $(date +%s) - start )) s; JSON: $out" >&2

python3 "$here/compare.py" "$out" --out "$md"
echo "== Markdown: $md" >&2

# The charts: SGEMM only when there are sgemm/ results, attention only when there are
# attention/ results; a missing gnuplot is a warning, not a failure.
chart_args=(--out "${out%.json}-sgemm.png" --attention-out "${out%.json}-attention.png")
[ -n "${AK_BENCH_CHART_OUT:-}" ] && chart_args+=(--out "$AK_BENCH_CHART_OUT")
[ -n "${AK_BENCH_ATTENTION_CHART_OUT:-}" ] &&
  chart_args+=(--attention-out "$AK_BENCH_ATTENTION_CHART_OUT")
python3 "$here/chart.py" "$out" "${chart_args[@]}" ||
  echo "== warning: no chart (chart.py failed; see above)" >&2
