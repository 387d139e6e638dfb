#pragma once

namespace akb {
// softmax/<attnkern|onednn|scalar>/<rows>x<cols>/threads:<1|2>
void register_softmax_benchmarks();
} // namespace akb
