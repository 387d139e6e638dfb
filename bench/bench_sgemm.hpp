#pragma once

namespace akb {
// sgemm/<attnkern|onednn|openblas>/<shape>/threads:<1|2>
void register_sgemm_benchmarks();
} // namespace akb
