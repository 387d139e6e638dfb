// Aligned scratch memory for packing and temporaries. Each thread keeps its
// last buffer so that repeated calls do not pay for malloc and page faults;
// a nested acquisition on the same thread simply allocates its own.
// release_cached_scratch frees what every thread keeps.
#pragma once

#include <cstddef>

namespace attnkern {

class Scratch {
public:
  explicit Scratch(std::size_t floats); // data() == nullptr when out of memory
  ~Scratch();
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  float *data() const { return data_; }

private:
  float *data_ = nullptr;
  std::size_t capacity_ = 0; // in floats
};

// Frees every thread's cached buffer (buffers in use stay with their calls).
void release_cached_scratch();

} // namespace attnkern
