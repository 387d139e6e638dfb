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

// Failure injection for the tests (they link the static library): the n-th
// memory acquisition from now on (Scratch and the entry points' own
// containers), on any thread, fails as if out of memory; 0 disarms. Built
// into every library (one relaxed atomic load per acquisition) so that the
// tests exercise the code that ships.
void fail_allocation_for_test(long n);
// Counts one acquisition; true where it is the one to fail.
bool injected_allocation_failure();
// Whether an armed failure has not been reached yet.
bool injected_allocation_failure_pending();

} // namespace attnkern
