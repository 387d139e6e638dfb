#pragma once

namespace akb {
// attention/<attnkern|unfused_onednn>/d<d>_L<L>_<causal|nomask>/threads:<1|2>
//   prefill: batch 1, 8 heads (8 kv heads), q_len = kv_len = L
// decode/<attnkern|unfused_onednn>/h32_kvh<32|8>_d128_kv<n>/threads:<1|2>
//   one query per head, 32 query heads over 32 or 8 kv heads
// membw/read/256MiB/threads:<1|2>
//   streaming-read reference (sum of a 256 MiB float array)
void register_attention_benchmarks();
} // namespace akb
