#include "guard_harness.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace guard {
namespace {

// PROT_NONE on both sides of every guarded buffer, wide enough that a page
// id of -1 or num_pages in a block table (a whole pool page before or past
// the pool) still lands inside it for the pools these cases build.
constexpr std::size_t kGuardBytes = std::size_t{1} << 20;

int g_failures = 0, g_cases = 0;
char g_isa[16] = "?";
int g_threads = 0;
// Written before each run so that the fault handler can name it.
char g_where[512] = "(no case yet)";

const char *placement_name(Placement p) {
  return p == Placement::Plain        ? "plain"
         : p == Placement::GuardAfter ? "guard after"
                                      : "guard before";
}

std::size_t page_size() {
  static const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return ps;
}

std::uint64_t splitmix(std::uint64_t &s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::uint32_t canary(ak_dtype t) { return t == AK_F32 ? kCanary32 : kCanary16; }

// Whether a stored element (bits widened to 32) is finite.
bool finite_bits(ak_dtype t, std::uint32_t b) {
  if (t == AK_F32) return std::isfinite(float_of(b));
  if (t == AK_F16) return (b & 0x7C00u) != 0x7C00u;
  return (b & 0x7F80u) != 0x7F80u;
}

void fault_handler(int sig) {
  // Only async-signal-safe calls: write, then the default action.
  const char head[] = "\nguard_pages: fault (an access outside a buffer) in ";
  ssize_t r = write(2, head, sizeof head - 1);
  r = write(2, g_where, std::strlen(g_where));
  r = write(2, "\n", 1);
  (void)r;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Compares one output of a guarded run with the plain run's: canaries in
// the same places, non-finite values bit for bit, finite ones within a
// rounding of fp32 (a guarded buffer's alignment may differ, and some
// kernels peel their stores to an alignment).
void compare(const Snapshot &plain, const Snapshot &g, const std::string &where) {
  if (plain.bits.size() != g.bits.size()) {
    fail(where + ": " + g.name + " has another size");
    return;
  }
  for (std::size_t i = 0; i < g.bits.size(); ++i) {
    const std::uint32_t a = plain.bits[i], b = g.bits[i];
    if (a == b) continue;
    bool close = false;
    if (g.type == AK_F32 && a != kCanary32 && b != kCanary32) {
      const float x = float_of(a), y = float_of(b);
      close = std::isfinite(x) && std::isfinite(y) &&
              std::fabs(x - y) <= 1e-5f * std::fmax(1.0f, std::fabs(x));
    }
    if (!close) {
      char msg[160];
      std::snprintf(msg, sizeof msg, ": %s[%zu] = bits 0x%08x, plain buffers gave 0x%08x",
                    g.name.c_str(), i, static_cast<unsigned>(b), static_cast<unsigned>(a));
      fail(where + msg);
      return;
    }
  }
}

// The plain run's outputs: exactly `written` elements changed from the
// canary, and finite where the case says so.
void check_written(const Snapshot &s, const std::string &where) {
  std::int64_t changed = 0;
  for (std::size_t i = 0; i < s.bits.size(); ++i) {
    if (s.bits[i] == canary(s.type)) continue;
    ++changed;
    if (s.finite && !finite_bits(s.type, s.bits[i])) {
      char msg[128];
      std::snprintf(msg, sizeof msg, ": %s[%zu] is not finite (bits 0x%08x)", s.name.c_str(), i,
                    static_cast<unsigned>(s.bits[i]));
      fail(where + msg);
      return;
    }
  }
  if (s.written >= 0 && changed != s.written)
    fail(where + ": " + s.name + " has " + std::to_string(changed) +
         " elements written, expected " + std::to_string(s.written));
}

} // namespace

Arena::~Arena() {
  for (const Block &b : blocks_) {
    if (b.map) munmap(b.map, b.map_bytes);
    std::free(b.heap);
  }
}

void *Arena::bytes(std::int64_t n, std::int64_t size) {
  const std::size_t want = static_cast<std::size_t>(n) * static_cast<std::size_t>(size);
  if (placement_ == Placement::Plain) {
    void *p = std::malloc(want > 0 ? want : 1);
    if (!p) std::abort();
    blocks_.push_back({nullptr, 0, p});
    return p;
  }
  const std::size_t ps = page_size();
  const std::size_t data = (want + ps - 1) / ps * ps;
  const std::size_t total = kGuardBytes + data + kGuardBytes;
  void *map = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) {
    std::perror("guard_pages: mmap");
    std::abort();
  }
  unsigned char *first = static_cast<unsigned char *>(map) + kGuardBytes;
  if (data > 0 && mprotect(first, data, PROT_READ | PROT_WRITE) != 0) {
    std::perror("guard_pages: mprotect");
    std::abort();
  }
  blocks_.push_back({map, total, nullptr});
  // After: the last byte is the last byte before the trailing guard (an
  // empty buffer points at the guard itself). Before: the first byte is the
  // first after the leading guard.
  return placement_ == Placement::GuardAfter ? first + data - want : first;
}

float *Arena::in(std::int64_t n, float scale) {
  float *p = static_cast<float *>(bytes(n, 4));
  fill_uniform(p, n, next_seed(), scale);
  return p;
}

float *Arena::out(std::int64_t n) {
  float *p = static_cast<float *>(bytes(n, 4));
  for (std::int64_t i = 0; i < n; ++i) p[i] = float_of(kCanary32);
  return p;
}

void *Arena::in_typed(ak_dtype t, std::int64_t n, float scale) {
  if (t == AK_F32) return in(n, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  fill_uniform(v.data(), n, next_seed(), scale);
  void *p = bytes(n, 2);
  // ak_convert's rounding is exact and the same on every instruction set.
  expect_ok(ak_convert(t, p, AK_F32, v.data(), n), "ak_convert (filling an input)");
  return p;
}

void *Arena::out_typed(ak_dtype t, std::int64_t n) {
  if (t == AK_F32) return out(n);
  auto *p = static_cast<std::uint16_t *>(bytes(n, 2));
  for (std::int64_t i = 0; i < n; ++i) p[i] = kCanary16;
  return p;
}

void Arena::keep(const char *name, const void *p, ak_dtype t, std::int64_t n, std::int64_t written,
                 bool finite) {
  Snapshot s{name, t, std::vector<std::uint32_t>(static_cast<std::size_t>(n)), written, finite};
  for (std::int64_t i = 0; i < n; ++i) {
    if (t == AK_F32) {
      std::memcpy(&s.bits[i], static_cast<const unsigned char *>(p) + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, static_cast<const unsigned char *>(p) + 2 * i, 2);
      s.bits[i] = h;
    }
  }
  kept_.push_back(std::move(s));
}

void Arena::expect_ok(ak_status s, const char *call) {
  if (s != AK_OK)
    fail(std::string(g_where) + ": " + call + " returned " + ak_status_string(s) + " (" +
         ak_last_error() + ")");
}

void Arena::check(bool ok, const std::string &what) {
  if (!ok) fail(std::string(g_where) + ": " + what);
}

void run_case(const std::string &name, const std::function<void(Arena &)> &body) {
  ++g_cases;
  std::vector<Snapshot> plain;
  for (Placement p : {Placement::Plain, Placement::GuardAfter, Placement::GuardBefore}) {
    std::snprintf(g_where, sizeof g_where, "%s [%s, %d threads, %s]", name.c_str(), g_isa,
                  g_threads, placement_name(p));
    const int before = g_failures;
    Arena arena(p);
    body(arena);
    if (g_failures != before) return; // one report per case
    if (p == Placement::Plain) {
      plain = arena.snapshots();
      for (const Snapshot &s : plain) check_written(s, g_where);
      if (g_failures != before) return;
      continue;
    }
    const auto &mine = arena.snapshots();
    if (mine.size() != plain.size()) {
      fail(std::string(g_where) + ": another number of outputs");
      return;
    }
    for (std::size_t i = 0; i < mine.size(); ++i) compare(plain[i], mine[i], g_where);
    if (g_failures != before) return;
  }
}

void fail(const std::string &message) {
  if (++g_failures <= 50) std::fprintf(stderr, "FAIL %s\n", message.c_str());
}

int failures() { return g_failures; }
int cases_run() { return g_cases; }

void set_config(const char *isa, int threads) {
  std::snprintf(g_isa, sizeof g_isa, "%s", isa);
  g_threads = threads;
}

void install_fault_report() {
  std::signal(SIGSEGV, fault_handler);
  std::signal(SIGBUS, fault_handler);
}

void fill_uniform(float *p, std::int64_t n, std::uint64_t seed, float scale) {
  std::uint64_t s = seed * 0x2545F4914F6CDD1Dull;
  for (std::int64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(splitmix(s) >> 11) * 0x1.0p-53; // [0, 1)
    p[i] = static_cast<float>((2.0 * u - 1.0) * scale);
  }
}

} // namespace guard
