#!/usr/bin/env bash
# The main job: install missing packages, build ak_bench (Release) if needed, run the
# comparisons with repetitions, then print the summary and the Markdown tables (compare.py)
# and draw the SGEMM and attention prefill charts (PNG, gnuplot).
#
#   bench/run.sh [quick|all|FILTER] [extra ak_bench arguments...]
#
#   quick    (the default) a representative subset, about 2 minutes on 2 cores: a few
#            SGEMM shapes (one skinny), softmax in and out of cache, prefill without and
#            with the causal mask at L 1024, encoder, decode, the FMA peak and the memory
#            references, each with its peers, at 1 and 2 threads
#   all      every benchmark (tens of minutes on 2 cores)
#   FILTER   a --benchmark_filter regex, e.g. 'sgemm/.*/nn_', 'softmax' or
#            'attention|decode|membw'
#
# Environment:
#   AK_BENCH_REPETITIONS  repetitions per benchmark (default 3; the median is reported)
#   AK_BENCH_THREADS      thread counts, a comma list (default 1,2; e.g. 1,4,16)
#   AK_BENCH_INTERLEAVE   1 (default): run the repetitions of all benchmarks in random
#                         order, so a burst of load from elsewhere hits every
#                         implementation alike; 0: each benchmark's repetitions back to back
#   AK_BENCH_ISA          avx2: hold every library to AVX2 (AK_ISA=avx2,
#                         ONEDNN_MAX_CPU_ISA=AVX2, AK_BENCH_OPENBLAS_CORETYPE=Haswell)
#   AK_BENCH_README_SECTION  also write the tables into bench/README.md's results
#                         section of that name (avx512, avx2; compare.py --update-readme)
#   AK_BENCH_README_SUMMARY  1: also write the summary table into the root README.md
#                         (compare.py --update-summary)
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
# The quick subset: 106 benchmarks on an AVX-512 machine at 1 and 2 threads, 27 s of
# per-benchmark minimum time per repetition (their MinTime; --benchmark_min_time does not
# change it), so about 75 s at 3 repetitions plus checks, inputs and pauses.
quick_filter='^peak/|^membw/'
quick_filter+='|^sgemm/[a-z]+/(nn_256|nn_1024|nt_1024|qk_L1024_d64|pv_L1024_d64|skinny_nt_m4)/'
quick_filter+='|^softmax/(attnkern|onednn|scalar)/(1024x1024|4096x4096_cold)/'
quick_filter+='|^attention/[a-z_]+/d(64|128)_L1024_'
quick_filter+='|^encoder/[a-z_]+/(b8_h12_d64_L128|b4_h16_d64_L384)/'
quick_filter+='|^decode/[a-z_]+/(h32_kvh(32|8)_d128_kv8192|h32_kvh8_d128_q4_kv4096)/'
quick_filter+='|^kvdecode/attnkern_(f32|bf16|bf16_paged16)/h32_kvh(32|8)_d128_kv8192/'

# How this run was started, recorded in the JSON (compare.py's summary prints it).
command=""
for var in AK_BENCH_ISA AK_BENCH_THREADS AK_BENCH_REPETITIONS AK_BENCH_INTERLEAVE \
           AK_BENCH_OPENBLAS_CORETYPE AK_BENCH_HUGEPAGES AK_ISA ONEDNN_MAX_CPU_ISA; do
  if [ -n "${!var:-}" ]; then command+="$var=$(printf '%q' "${!var}") "; fi
done
command+="bench/run.sh"
for arg in "$@"; do command+=" $(printf '%q' "$arg")"; done

filter="${1:-quick}"
if [ "$#" -gt 0 ]; then shift; fi
case "$filter" in
  quick) filter="$quick_filter" ;;
  all) filter="" ;;
esac

case "${AK_BENCH_ISA:-}" in
  "") ;;
  avx2) export AK_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 AK_BENCH_OPENBLAS_CORETYPE=Haswell ;;
  *) echo "run.sh: AK_BENCH_ISA takes avx2 (unset: every library picks its best)" >&2; exit 2 ;;
esac
export AK_BENCH_COMMAND="$command"

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

compare_args=(--out "$md")
[ -n "${AK_BENCH_README_SECTION:-}" ] &&
  compare_args+=(--update-readme "$here/README.md" --section "$AK_BENCH_README_SECTION")
[ "${AK_BENCH_README_SUMMARY:-0}" = "1" ] && compare_args+=(--update-summary "$root/README.md")
python3 "$here/compare.py" "$out" "${compare_args[@]}"
echo "== Markdown: $md" >&2

# The charts: SGEMM only when there are sgemm/ results, attention only when there are
# attention/ results; a missing gnuplot is a warning, not a failure.
chart_args=(--out "${out%.json}-sgemm.png" --attention-out "${out%.json}-attention.png")
[ -n "${AK_BENCH_CHART_OUT:-}" ] && chart_args+=(--out "$AK_BENCH_CHART_OUT")
[ -n "${AK_BENCH_ATTENTION_CHART_OUT:-}" ] &&
  chart_args+=(--attention-out "$AK_BENCH_ATTENTION_CHART_OUT")
python3 "$here/chart.py" "$out" "${chart_args[@]}" ||
  echo "== warning: no chart (chart.py failed; see above)" >&2

# The summary once more, last, so it is on screen without scrolling back.
echo >&2
sed -n '/^### Summary/,/^### Context/p' "$md" | sed '$d'
