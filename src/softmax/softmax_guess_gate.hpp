// Whether a thread's next softmax item guesses that its maxima lie in the
// unshifted range (the row softmax and the short axes of softmax_axis).
#pragma once

namespace attnkern {
namespace AK_ISA_NS {

// One thread's choice, item after item, of whether to guess that a
// maximum is in the unshifted range (softmax_rows_at, softmax_axis_block):
// after a refuted guess, none for the next 16 items, so that data whose
// maxima lie elsewhere wastes at most one exp pass in 17 items. Speed only:
// a guess never changes a result.
class GuessGate {
public:
  explicit GuessGate(bool allowed) : left_(allowed ? 0 : -1) {}
  bool open() const { return left_ == 0; }
  // After an item: `held`, whether its guess (if it made one) held.
  void after(bool held) {
    if (left_ > 0)
      --left_;
    else if (left_ == 0 && !held)
      left_ = kSkip;
  }

private:
  static constexpr int kSkip = 16;
  int left_; // items left without a guess; -1: never
};

} // namespace AK_ISA_NS
} // namespace attnkern
