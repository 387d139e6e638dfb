// The long axes of softmax_axis (softmax_axis_long.hpp): how the axis is
// cut into bands of rows, and where each band's state and a piece's merged
// state live in a thread's scratch buffer.
#pragma once

#include <cstdint>

namespace attnkern {
namespace AK_ISA_NS {

constexpr int kAxisStepRows = 4; // rows per step of a band's passes

// The axis is cut into bands of rows, a function of its length alone: at
// most kMaxBands, of at least kMinBandRows rows each (a multiple of the
// step, but the last). Threads that share one piece take whole bands, so
// that each writes rows of its own. Split by columns, two threads write
// into the same pages a few hundred bytes apart, which now and then ran at
// a fraction of the speed (lines not shared; the prefetchers are the likely
// cause; docs/tuning.md).
constexpr std::int64_t kMinBandRows = 64, kMaxBands = 16;

struct AxisBands {
  std::int64_t count, rows; // rows per band; the last may have fewer
};
inline AxisBands axis_bands(std::int64_t axis_len) {
  std::int64_t count = axis_len / kMinBandRows;
  count = count < 1 ? 1 : count > kMaxBands ? kMaxBands : count;
  std::int64_t rows = (axis_len + count - 1) / count;
  rows = (rows + kAxisStepRows - 1) / kAxisStepRows * kAxisStepRows;
  return {(axis_len + rows - 1) / rows, rows};
}

// Which exp a vector of columns takes: vexp_unshifted where every lane's
// shift is 0 (the same bits as vexp_shifted there, in 7 of its 21
// operations), vexp_shifted where every |shift| <= kShiftedExpMaxShift, else
// vexp_diff (all three agree on the lanes that suit more than one).
enum class AxisExp : std::uint8_t { diff, shifted, unshifted };

// A band's state, per column of its piece: shift, sum of exp(x - shift) and
// its compensation, the limit above which a value moves the shift (-inf:
// none yet); per vector: the exp its lanes' shifts allow (AxisExp), the
// row below which the kept exponentials are stale (redo) and, in place, the
// row below which the first pass stores against the merged shift (last).
struct AxisBandState {
  float *m, *s, *c, *limit;
  AxisExp *exp;
  std::int64_t *redo, *last;
};
// A piece's shared state: each column's final shift, its exp choice per
// vector, the denominator and its reciprocal; and the shift and limit every
// band starts from, with its exp choice.
struct AxisMerged {
  float *m, *den, *inv, *seed_m, *seed_limit, *den_lo;
  AxisExp *exp, *seed_exp;
};

// Where the states of one piece's bands and its merged state live in a
// scratch buffer (one such set per piece in flight).
struct AxisStateLayout {
  std::int64_t wpad, vectors, bands;
  std::int64_t band_floats() const { return (4 * wpad + 5 * vectors + 15) / 16 * 16; }
  std::int64_t set_floats() const { return bands * band_floats() + 6 * wpad + 2 * vectors; }
  AxisBandState band(float *set, std::int64_t b) const {
    float *p = set + b * band_floats();
    auto *redo = reinterpret_cast<std::int64_t *>(p + 4 * wpad);
    return {p,
            p + wpad,
            p + 2 * wpad,
            p + 3 * wpad,
            reinterpret_cast<AxisExp *>(redo + 2 * vectors),
            redo,
            redo + vectors};
  }
  AxisMerged merged(float *set) const {
    float *p = set + bands * band_floats();
    auto *flags = reinterpret_cast<AxisExp *>(p + 6 * wpad);
    return {p,     p + wpad,       p + 2 * wpad, p + 3 * wpad, p + 4 * wpad, p + 5 * wpad,
            flags, flags + vectors};
  }
};

} // namespace AK_ISA_NS
} // namespace attnkern
