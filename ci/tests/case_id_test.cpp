// case_id: a generated problem in one line, naming only what differs from the plain problem.
#include "case_id.h"

#include <gtest/gtest.h>

#include "attest/problem.h"

namespace attest {
namespace {

TEST(CaseId, PlainProblemNamesLengthsWidthAndNoMask) {
  Problem p;
  p.shape = {1, 1, 1, 5, 9, 64, 64};
  EXPECT_EQ(case_id(p), "Tq=5 Tk=9 D=64 mask=none");
}

TEST(CaseId, NamesBatchHeadsMaskTermsModifiersAndStorage) {
  Problem p;
  p.shape = {2, 8, 2, 5, 9, 64, 32};
  p.mask.causal = true;
  p.mask.window = 3;
  p.mask.kv_valid = {9, 4};
  p.q_offset = 4;
  p.modifiers.softcap = 30;
  p.modifiers.sinks = std::vector<float>(8, 0.5f);
  p.rope.enabled = true;
  p.storage.k = p.storage.v = Scalar::kQ8;
  EXPECT_EQ(case_id(p),
            "B=2 H=8/2 Tq=5 Tk=9 Dk=64 Dv=32 mask=causal+window(3)+key_padding q_offset=4 mod=softcap(30)+sinks+rope "
            "dtype=q:f32,k:q8,v:q8");
}

TEST(CaseId, OneSharedStorageIsNamedOnce) {
  Problem p;
  p.shape = {1, 4, 4, 1, 7, 16, 16};
  p.storage.q = p.storage.k = p.storage.v = Scalar::kBF16;
  EXPECT_EQ(case_id(p), "H=4 Tq=1 Tk=7 D=16 mask=none dtype=bf16");
}

}  // namespace
}  // namespace attest
