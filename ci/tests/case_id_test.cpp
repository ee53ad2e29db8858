// case_id: a generated problem in one line, naming only what differs from the plain problem.
#include "attest/properties/case_id.h"

#include <gtest/gtest.h>

#include "attest/model/problem.h"

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

TEST(CaseId, FileStemIsTheIdWithOnlyFileNameCharacters) {
  Problem p;
  p.shape = {2, 8, 2, 5, 9, 64, 32};
  p.mask.causal = true;
  p.mask.window = 3;
  p.modifiers.softcap = 30;
  p.storage.k = p.storage.v = Scalar::kQ8;
  EXPECT_EQ(case_file_stem(p), "B2_H8-2_Tq5_Tk9_Dk64_Dv32_causal+window3_softcap30_q-f32-k-q8-v-q8");
  EXPECT_EQ(counterexample_path("out", "grid_x", "mutant:no_rescale", p),
            "out/grid_x__mutant_no_rescale__B2_H8-2_Tq5_Tk9_Dk64_Dv32_causal+window3_softcap30_q-f32-k-q8-v-q8.json");
}

TEST(CaseId, FileStemStaysShort) {
  Problem p;
  p.shape = {64, 64, 8, 4096, 32768, 256, 128};
  p.mask.causal = true;
  p.mask.window = 1000000;
  p.mask.chunk = 1000000;
  p.mask.lookahead = 1000000;
  p.mask.kv_valid.assign(64, 1);
  p.mask.q_valid.assign(64, 1);
  p.q_offset = 123456789;
  p.scale = 0.0625;
  p.modifiers.softcap = 50;
  p.rope.enabled = true;
  EXPECT_LE(case_file_stem(p).size(), 100u);
}

}  // namespace
}  // namespace attest
