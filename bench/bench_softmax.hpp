#pragma once

namespace akb {
// softmax/<attnkern|onednn|scalar>/<rows>x<cols>/threads:<1|2>
// softmax/<attnkern|onednn|scalar>/4096x4096_cold/threads:<1|2>   (rotated buffers)
// softmax/<attnkern_log|attnkern_axis>/<rows>x<cols>/threads:<1|2>
void register_softmax_benchmarks();
} // namespace akb
