// ak_bench entry point: makes sure OpenBLAS picks its own kernels for this CPU,
// records what was measured (context), registers the benchmarks and runs them.
#include "bench_attention.hpp"
#include "bench_kv_cache.hpp"
#include "bench_modifiers.hpp"
#include "bench_common.hpp"
#include "bench_convert.hpp"
#include "bench_peak.hpp"
#include "bench_rope.hpp"
#include "bench_sgemm.hpp"
#include "bench_softmax.hpp"
#include "peers.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <unistd.h>

namespace {

// Set in the environment of the re-executed process: the OPENBLAS_CORETYPE
// value that was removed.
constexpr const char *kRemovedVar = "AK_BENCH_REMOVED_OPENBLAS_CORETYPE";
// Lets the user pin an OpenBLAS core on purpose (e.g. SkylakeX or Haswell).
constexpr const char *kForceVar = "AK_BENCH_OPENBLAS_CORETYPE";

// OpenBLAS reads OPENBLAS_CORETYPE once, when the library is loaded, which has
// already happened by the time main() runs. A preset value (some environments
// export OPENBLAS_CORETYPE=Haswell, holding OpenBLAS to AVX2 kernels) is
// therefore removed and the binary executed again, so that OpenBLAS detects
// the CPU itself. Returns a description of the setting that is in effect.
std::string settle_openblas_coretype(char **argv) {
  const char *have = std::getenv("OPENBLAS_CORETYPE");
  const char *force = std::getenv(kForceVar);
  if (force != nullptr && *force != '\0') {
    if (have == nullptr || std::strcmp(have, force) != 0) {
      setenv("OPENBLAS_CORETYPE", force, 1);
      execv("/proc/self/exe", argv);
      std::fprintf(stderr, "ak_bench: execv(/proc/self/exe) failed; %s not applied\n", kForceVar);
      unsetenv("OPENBLAS_CORETYPE");
      if (have != nullptr) setenv("OPENBLAS_CORETYPE", have, 1);
      return have != nullptr ? std::string(have) + " (preset; forcing failed)"
                             : "not set (forcing failed)";
    }
    return std::string(force) + " (forced by " + kForceVar + ")";
  }
  if (have != nullptr) {
    const std::string was = have;
    setenv(kRemovedVar, was.c_str(), 1);
    unsetenv("OPENBLAS_CORETYPE");
    execv("/proc/self/exe", argv);
    // Still here: measure with the preset, but say so.
    std::fprintf(stderr,
                 "ak_bench: execv(/proc/self/exe) failed; OpenBLAS keeps "
                 "OPENBLAS_CORETYPE=%s\n",
                 was.c_str());
    unsetenv(kRemovedVar);
    return was + " (preset, could not be removed)";
  }
  if (const char *removed = std::getenv(kRemovedVar)) {
    const std::string note =
        std::string("not set (preset ") + removed + " removed, binary re-executed)";
    unsetenv(kRemovedVar);
    return note;
  }
  return "not set";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "unknown";
}

void add(const char *key, const std::string &value) { benchmark::AddCustomContext(key, value); }

// The environment variables that change what is measured, then the binary's
// arguments: how to repeat the run (compare.py's summary prints it).
std::string own_command(int argc, char **argv) {
  static const char *const vars[] = {"AK_ISA",
                                     "ONEDNN_MAX_CPU_ISA",
                                     "AK_BENCH_OPENBLAS_CORETYPE",
                                     "AK_BENCH_THREADS",
                                     "AK_BENCH_HUGEPAGES",
                                     "AK_BENCH_TOLERANCE",
                                     "OMP_PROC_BIND",
                                     "OMP_PLACES"};
  std::string line;
  for (const char *var : vars) {
    if (const char *value = std::getenv(var)) line += std::string(var) + "=" + value + " ";
  }
  for (int i = 0; i < argc; ++i) line += (i ? " " : "") + std::string(argv[i]);
  return line;
}

} // namespace

int main(int argc, char **argv) {
  const std::string coretype_note = settle_openblas_coretype(argv);
  const std::string command = own_command(argc, argv); // before Initialize takes the flags

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  add("cpu_model", cpu_model());
  add("ak_bench_command", command);
  // bench/run.sh's own command line, when it started the run.
  if (const char *run = std::getenv("AK_BENCH_COMMAND")) add("run_command", run);
  add("attnkern_version", ak_version());
  add("attnkern_isa", ak_get_isa());
  add("openblas_corename", akb::peers::openblas_corename());
  add("openblas_config", akb::peers::openblas_config());
  add("openblas_coretype_env", coretype_note);
  add("onednn_version", akb::peers::onednn_version());
  add("onednn_isa", akb::peers::onednn_effective_isa());
  add("huge_pages", akb::huge_pages_note());
  add("omp_max_threads", std::to_string(omp_get_max_threads()));
  add("scalar_softmax", "std::exp per element, OpenMP over rows, baseline ISA, no fast-math");
  add("sgemm_call", "row-major, alpha=1, beta=0; GB/s counts A+B read once, C written once");
  add("unfused_attention",
      "per head: dnnl_sgemm scale*Q*K^T into an L x kv_len scratch, -inf above the diagonal "
      "(causal), oneDNN softmax primitive in place, dnnl_sgemm P*V (decode: one softmax call "
      "for all heads' score rows)");

  akb::register_peak_benchmarks();
  akb::register_sgemm_benchmarks();
  akb::register_softmax_benchmarks();
  akb::register_attention_benchmarks();
  akb::register_kv_cache_benchmarks();
  akb::register_modifier_benchmarks();
  akb::register_convert_benchmarks();
  akb::register_rope_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
