#pragma once

namespace akb {
// Attention over f16/bf16 and paged K/V caches (bench_kv_cache.cpp).
void register_kv_cache_benchmarks();
} // namespace akb
