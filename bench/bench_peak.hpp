// Register-only FMA (or mul + add) loops: the measured arithmetic peak per
// instruction set, the yardstick of the SGEMM tables' "% of peak" columns.
#pragma once

namespace akb {
void register_peak_benchmarks();
}
