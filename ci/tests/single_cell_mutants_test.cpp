// Mutants whose bug lives in one cell of the coverage model: the default check of the
// property each names kills it, and its shrunk counterexample lies in that cell. Whether the
// random draw or a top-up found it is printed: the top-ups are what makes the kill certain.
#include <gtest/gtest.h>

#include <functional>
#include <iostream>

#include "attest/mutants/mutants.h"
#include "certify.h"

namespace attest {
namespace {

struct SingleCell {
  const char* mutant;
  const char* cell;
  std::function<bool(const Problem&)> in_cell;
};

bool no_mask_term(const Problem& p) {
  return (features_used_by(p) & FeatureSet::of_kind(FeatureKind::kMaskTerm)).empty();
}

const std::vector<SingleCell>& single_cell_mutants() {
  static const std::vector<SingleCell> cells = {
      {"dk128_drops_last_lane", "Dk = 128", [](const Problem& p) { return p.shape.head_dim == 128; }},
      {"kv_head_table_of_8", "H > 8", [](const Problem& p) { return p.shape.heads > 8; }},
      {"batch_table_of_4", "B > 4", [](const Problem& p) { return p.shape.batch > 4; }},
      {"pair_bug_seventeen_paths", "H > 8 and B > 4, 17 path names",
       [](const Problem& p) { return p.shape.heads > 8 && p.shape.batch > 4; }},
      {"wide_path_unmasked_softcap", "Tq >= 64, Dv % 16 = 0, softcap, no mask, partial last key tile",
       [](const Problem& p) {
         return p.shape.q_len >= 64 && p.shape.value_dim % 16 == 0 && p.modifiers.softcap && no_mask_term(p) &&
                p.shape.k_len % 32 != 0;
       }},
      {"sinks_drop_partial_tile", "sinks, partial last key tile",
       [](const Problem& p) { return !p.modifiers.sinks.empty() && p.shape.k_len % 32 != 0; }},
      {"split_kv_drops_remainder", "B = 1, Tq <= 4, Tk >= 512, Tk % 256 != 0",
       [](const Problem& p) {
         return p.shape.batch == 1 && p.shape.q_len <= 4 && p.shape.k_len >= 512 && p.shape.k_len % 256 != 0;
       }},
      {"split_kv_declared", "B = 1, Tq <= 4, Tk >= 512, Tk % 256 != 0 (declared)",
       [](const Problem& p) {
         return p.shape.batch == 1 && p.shape.q_len <= 4 && p.shape.k_len >= 512 && p.shape.k_len % 256 != 0;
       }},
      {"dv_beyond_dk_zero", "Dv > Dk", [](const Problem& p) { return p.shape.value_dim > p.shape.head_dim; }},
      {"decode_window_evicts_page", "decode past a window", [](const Problem& p) { return p.mask.window.has_value(); }},
  };
  return cells;
}

void PrintTo(const SingleCell& c, std::ostream* os) { *os << c.mutant << " (" << c.cell << ")"; }

class SingleCellMutant : public ::testing::TestWithParam<SingleCell> {};

TEST_P(SingleCellMutant, KilledAtDefaultInItsCell) {
  const MutantEntry& entry = find_mutant(GetParam().mutant);
  const auto mutant = entry.make();
  CertifyOptions options;
  options.progress = false;
  options.property_cases = 100;
  options.seed = 1;
  options.sizes = sizes_for_budget(100);
  options.out_dir = ::testing::TempDir() + "/single_cell";
  const CheckResult r =
      check_property(find_property(entry.expected_property), *mutant, discover_paths(*mutant, options), options);
  ASSERT_EQ(r.failures, 1) << entry.name << " passed " << entry.expected_property;
  ASSERT_TRUE(r.counterexample.has_value());
  EXPECT_TRUE(GetParam().in_cell(*r.counterexample)) << "the counterexample lies outside " << GetParam().cell;
  const bool by_top_up = r.first_failure.rfind("[", 0) == 0;
  std::cout << entry.name << " (" << GetParam().cell << "): killed by " << entry.expected_property << " in "
            << (by_top_up ? r.first_failure.substr(0, r.first_failure.find(']') + 1) : "the random draw") << "\n";
}

INSTANTIATE_TEST_SUITE_P(Issue20, SingleCellMutant, ::testing::ValuesIn(single_cell_mutants()),
                         [](const auto& info) { return std::string(info.param.mutant); });

}  // namespace
}  // namespace attest
