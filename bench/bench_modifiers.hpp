#pragma once

namespace akb {
// Softcap, ALiBi, sinks and packed variable-length batches (bench_modifiers.cpp).
void register_modifier_benchmarks();
} // namespace akb
