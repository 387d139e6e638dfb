// ak_convert and ak_kv_cache_store out of cache, each beside a memcpy of the
// same bytes read + written.
#pragma once

namespace akb {
void register_convert_benchmarks();
}
