// masked_inputs_have_no_influence poisons the keys some rows may not see and compares those rows.
// Under bottom-right causality another row sees each of them, so a |V| contract covers their V:
// the poison must stay inside it, or every case is refused as outside the declaration. It was not,
// and a decode-only kernel (bottom-right causal problems alone) with a |V| contract ended
// INSUFFICIENT ("V = inf of a visible key is beyond the contract"; attest selfcheck, seed 7 #52).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../src/problem_edits.h"
#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/contract.h"
#include "attest/properties/cases.h"
#include "attest/reference/reference.h"

namespace attest {
namespace {

// B = 1, H = 1, Tq = 4 at positions 2..5, Tk = 6, bottom-right causal: row 0 sees keys 0..2 only.
// V inside |V| <= limit.
Problem bottom_right_causal(Scalar v_storage, double limit) {
  Problem p;
  p.shape = {1, 1, 1, 4, 6, 32, 32};
  p.resize_buffers();
  fill_random(p, 11);
  for (float& x : p.v) x = static_cast<float>(std::clamp(x * limit / 4, -limit / 2, limit / 2));
  p.mask.causal = true;
  p.storage.v = v_storage;
  p.fit_to_storage();
  return p;
}

TEST(PoisonWithinContract, ValuesOfKeysAnotherRowSeesStayInsideTheContract) {
  for (const Scalar storage : {Scalar::kF32, Scalar::kBF16, Scalar::kF16, Scalar::kQ8, Scalar::kQ4})
    for (const double limit : {1.0, 4.0, 100.0, 1e4}) {
      Capabilities caps = make_loop_kernel()->capabilities();
      caps.contract.max_abs_value = limit;
      const Problem clean = bottom_right_causal(storage, limit);
      Problem p = clean;
      const KeySet hidden_from_row0 = keys_masked_for_row(p, reference_mask(p), 0);
      ASSERT_EQ(poison(p, hidden_from_row0, Poisoned::kValues, caps), 3);
      const std::string what = std::string(to_string(storage)) + " |V| <= " + std::to_string(limit);
      EXPECT_EQ(caps.contract.violation(p), "") << what;
      // Still a poison: keys 3..5 hold the contract's edge, of alternating sign.
      for (int j = 3; j < 6; ++j) {
        const float v = p.v[std::size_t(j) * 32];
        EXPECT_GT(std::fabs(v), 0.99 * limit) << what << ", key " << j;
        EXPECT_LE(std::fabs(v), limit) << what << ", key " << j;
        EXPECT_EQ(v < 0, j % 2 == 1) << what << ", key " << j;
      }
      // Keys row 0 sees are left alone.
      for (std::size_t e = 0; e < std::size_t(3) * 32; ++e) EXPECT_EQ(p.v[e], clean.v[e]) << what;
    }
}

// Keys no row sees are the input domain's: they keep the non-finite poison.
TEST(PoisonWithinContract, KeysNoRowSeesStillGetNonFinitePoison) {
  Capabilities caps = make_loop_kernel()->capabilities();
  caps.contract.max_abs_value = 4;
  Problem p = bottom_right_causal(Scalar::kF32, 4);
  p.mask.kv_valid = {4};  // keys 4 and 5 padded
  ASSERT_EQ(poison(p, unseen_keys(p, reference_mask(p)), Poisoned::kValues, caps), 2);
  EXPECT_EQ(caps.contract.violation(p), "");
  EXPECT_FALSE(std::isfinite(p.v[std::size_t(4) * 32]));
  EXPECT_FALSE(std::isfinite(p.v[std::size_t(5) * 32]));
}

}  // namespace
}  // namespace attest
