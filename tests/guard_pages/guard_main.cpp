// Every entry point of the C API over awkward shapes with buffers of exactly
// the size the header requires, each followed (or preceded) by a PROT_NONE
// page, on every instruction set the CPU has, on 1 and 2 threads.
//   guard_pages_check [suite]   suite: gemm_softmax, storage, attention,
//                               paged, bad_ids (default: all)
// Exits 0 when every case passed; a read or write outside a buffer kills
// the process with SIGSEGV after naming the case.
#include <chrono>
#include <cstdio>
#include <cstring>

#include "guard_harness.hpp"

int main(int argc, char **argv) {
  struct Suite {
    const char *name;
    void (*run)();
  };
  const Suite suites[] = {{"gemm_softmax", guard::gemm_softmax_cases},
                          {"storage", guard::storage_cases},
                          {"attention", guard::attention_cases},
                          {"paged", guard::paged_cases},
                          {"bad_ids", guard::bad_id_cases}};
  const char *only = argc > 1 ? argv[1] : nullptr;
  bool known = !only;
  for (const Suite &s : suites) known = known || std::strcmp(s.name, only) == 0;
  if (!known) {
    std::fprintf(stderr, "unknown suite %s\n", only);
    return 2;
  }
  guard::install_fault_report();
  const auto start = std::chrono::steady_clock::now();
  int isas = 0;
  for (const char *isa : {"avx512", "avx2", "sse2", "neon", "scalar"}) {
    if (!ak_isa_supported(isa)) continue;
    if (ak_set_isa(isa) != AK_OK || std::strcmp(ak_get_isa(), isa) != 0) {
      guard::fail(std::string("ak_set_isa(\"") + isa + "\") did not take");
      continue;
    }
    ++isas;
    for (int threads : {1, 2}) {
      if (ak_set_num_threads(threads) != AK_OK) guard::fail("ak_set_num_threads failed");
      guard::set_config(isa, threads);
      for (const Suite &s : suites)
        if (!only || std::strcmp(s.name, only) == 0) s.run();
    }
  }
  ak_set_isa(nullptr);
  ak_set_num_threads(0);
  if (isas == 0) guard::fail("no instruction set is supported (not even scalar)");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("guard_pages %s: %d cases x 3 placements on %d instruction sets x 2 thread counts, "
              "%d failures, %.1f s\n",
              only ? only : "all", guard::cases_run(), isas, guard::failures(), seconds);
  return guard::failures() == 0 ? 0 : 1;
}
