// ak_rope against a plain loop of std::sin / std::cos per element, and
// ak_embedding, counted in bytes read + written (as membw/copy counts them).
#pragma once

namespace akb {
void register_rope_benchmarks();
}
