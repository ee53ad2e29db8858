#include "attest/properties/cases.h"

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "attest/model/features.h"

namespace attest {

void fill_random(Problem& p, std::uint64_t seed, double magnitude) {
  std::mt19937_64 rng(seed);
  // Uniform on [-sqrt(3), sqrt(3)] has unit variance.
  std::uniform_real_distribution<double> unit(-std::sqrt(3.0), std::sqrt(3.0));
  for (auto* buffer : {&p.q, &p.k, &p.v})
    for (float& x : *buffer) x = static_cast<float>(unit(rng) * magnitude);
  p.fit_to_storage();
}

Problem benchmark_problem(int q_len, int k_len, int head_dim, bool causal) {
  Problem p;
  p.shape = {1, 1, 1, q_len, k_len, head_dim, head_dim};
  p.mask.causal = causal;
  p.resize_buffers();
  fill_random(p, 1);
  return p;
}

Problem worked_example() {
  Problem p;
  p.shape = {.batch = 1, .heads = 1, .kv_heads = 1, .q_len = 3, .k_len = 3, .head_dim = 2, .value_dim = 2};
  p.mask.causal = true;
  p.q = {1, 0, 0, 1, 1, 1};
  p.k = p.q;
  p.v = {1, 0, 0, 2, 3, 1};
  return p;
}

namespace {

Problem shaped(Shape s, std::uint64_t seed) {
  Problem p;
  p.shape = s;
  p.resize_buffers();
  fill_random(p, seed);
  return p;
}

// The mask kinds the grid applies to each shape, alone and combined: every integer mask term of
// the feature table (window, chunk, ...) is one kind, its parameter a third of Tk.
enum class MaskKind {
  kNone,
  kCausal,
  kCausalTopLeft,
  kIntegerTerm,
  kKeyPadding,
  kQueryPadding,
  kSegments,
  kExplicit,
  kAll
};

struct GridMask {
  MaskKind kind;
  const FeatureInfo* term = nullptr;  // kIntegerTerm: which
  std::string name() const {
    switch (kind) {
      case MaskKind::kNone:
        return "none";
      case MaskKind::kCausal:
        return "causal";
      case MaskKind::kCausalTopLeft:
        return "causal_top_left";
      case MaskKind::kIntegerTerm:
        return term->name;
      case MaskKind::kKeyPadding:
        return "key_padding";
      case MaskKind::kQueryPadding:
        return "query_padding";
      case MaskKind::kSegments:
        return "segments";
      case MaskKind::kExplicit:
        return "explicit";
      case MaskKind::kAll:
        return "all";
    }
    return "?";
  }
};

std::vector<GridMask> grid_masks() {
  std::vector<GridMask> out = {{MaskKind::kNone}, {MaskKind::kCausal}, {MaskKind::kCausalTopLeft}};
  for (const FeatureInfo* term : integer_mask_terms()) out.push_back({MaskKind::kIntegerTerm, term});
  for (MaskKind k :
       {MaskKind::kKeyPadding, MaskKind::kQueryPadding, MaskKind::kSegments, MaskKind::kExplicit, MaskKind::kAll})
    out.push_back({k});
  return out;
}

void apply_mask(Problem& p, const GridMask& mask, std::uint64_t seed) {
  const Shape& s = p.shape;
  std::mt19937_64 rng(seed);
  MaskSpec& m = p.mask;
  const MaskKind kind = mask.kind;
  auto all = kind == MaskKind::kAll;
  if (kind == MaskKind::kCausal || all) m.causal = true;
  if (kind == MaskKind::kCausalTopLeft) {
    m.causal = true;
    p.q_offset = 0;
  }
  for (const FeatureInfo* term : integer_mask_terms())
    if (term == mask.term || all) m.*term->parameter = std::max(1, s.k_len / 3);
  if (kind == MaskKind::kKeyPadding || all)
    for (int b = 0; b < s.batch; ++b) m.kv_valid.push_back(b == 0 ? s.k_len : (s.k_len * b) / (s.batch + 1));
  if (kind == MaskKind::kQueryPadding || all)
    for (int b = 0; b < s.batch; ++b) m.q_valid.push_back(std::max(0, s.q_len - 1 - b));
  if (kind == MaskKind::kSegments || all) {
    // Packed sequences: contiguous segments of random length, numbered in order.
    auto segments = [&](int len, std::vector<int>& out) {
      for (int b = 0; b < s.batch; ++b) {
        int id = 0;
        for (int t = 0; t < len; ++t) {
          if (t > 0 && rng() % 5 == 0) ++id;
          out.push_back(id);
        }
      }
    };
    segments(s.q_len, m.q_segment);
    segments(s.k_len, m.k_segment);
  }
  if (kind == MaskKind::kExplicit || all) {
    m.explicit_mask.resize(std::size_t(s.batch) * s.q_len * s.k_len);
    for (auto& x : m.explicit_mask) x = rng() % 4 != 0;
  }
}

}  // namespace

std::vector<NamedProblem> golden_problems() {
  std::vector<NamedProblem> out;
  out.push_back({"worked_example", worked_example()});
  out.push_back({"one_token", shaped({1, 2, 1, 1, 1, 4, 3}, 11)});
  Problem one_key = shaped({1, 2, 2, 5, 1, 4, 4}, 12);
  out.push_back({"one_key_many_queries", one_key});
  Problem empty = shaped({2, 2, 1, 6, 3, 4, 4}, 13);  // causal bottom-right, Tq > Tk: rows 0-2 see nothing
  empty.mask.causal = true;
  empty.mask.kv_valid = {3, 0};  // and batch 1 has no keys at all
  out.push_back({"empty_rows", empty});
  return out;
}

std::vector<NamedProblem> grid_problems() {
  std::vector<NamedProblem> out;
  // (Tq, Tk) around the tiles (blocked: 32 rows; tiled: 128 x 64, in panels of 4 rows) and the
  // page size 16, both orders, and the 1s.
  const std::vector<std::pair<int, int>> lengths = {{1, 1},   {1, 17},  {1, 33},  {5, 1},   {15, 15},  {16, 16},
                                                    {17, 17}, {31, 31}, {32, 32}, {33, 33}, {7, 33},   {33, 7},
                                                    {31, 65}, {65, 31}, {33, 64}, {64, 65}, {129, 63}, {127, 129}};
  std::uint64_t seed = 100;
  for (auto [tq, tk] : lengths)
    for (const GridMask& mask : grid_masks()) {
      Problem p = shaped({2, 2, 1, tq, tk, 8, 5}, ++seed);
      apply_mask(p, mask, seed);
      out.push_back({fmt::format("tq{}_tk{}_{}", tq, tk, mask.name()), std::move(p)});
    }
  // GQA ratios 1, 2, 4 and all-to-one, with Dk != Dv both ways.
  for (int kv_heads : {4, 2, 1})
    for (auto [dk, dv] : {std::pair{16, 4}, std::pair{4, 16}}) {
      Problem p = shaped({2, 4, kv_heads, 17, 33, dk, dv}, ++seed);
      p.mask.causal = true;
      out.push_back({fmt::format("gqa_h4_kv{}_dk{}_dv{}", kv_heads, dk, dv), std::move(p)});
    }
  // RoPE, alone and with a mask, including a long offset.
  for (bool causal : {false, true}) {
    Problem p = shaped({1, 2, 2, 17, 33, 8, 8}, ++seed);
    p.rope.enabled = true;
    p.mask.causal = causal;
    out.push_back({fmt::format("rope_{}", causal ? "causal" : "none"), std::move(p)});
  }
  Problem far = shaped({1, 2, 1, 3, 40, 8, 8}, ++seed);
  far.rope.enabled = true;
  far.q_offset = 100000;
  out.push_back({"rope_far_offset", std::move(far)});
  // Logits far from unit scale: tiny and large magnitudes.
  for (double magnitude : {1e-3, 30.0}) {
    Problem p = shaped({1, 2, 2, 33, 33, 8, 8}, ++seed);
    fill_random(p, seed, magnitude);
    p.mask.causal = true;
    out.push_back({fmt::format("magnitude_{}", magnitude), std::move(p)});
  }
  // Every head width a multiple of 8 up to 256 and odd ones beside the powers of two (Dk = Dv,
  // causal): a kernel wrong at a single width between the usual ones (48) fails at any budget, not
  // after a lucky draw. A contract with fixed widths folds them onto its own.
  std::vector<int> widths = {13, 31, 33, 63, 65, 127, 129, 255};
  for (int d = 8; d <= 256; d += 8) widths.push_back(d);
  for (int d : widths) {
    Problem p = shaped({1, 2, 1, 9, 20, d, d}, ++seed);
    p.mask.causal = true;
    out.push_back({fmt::format("width_d{}", d), std::move(p)});
  }
  // Inputs exactly representable in bf16 and fp16.
  for (Scalar ip : {Scalar::kBF16, Scalar::kF16}) {
    Problem p;
    p.shape = {1, 2, 1, 17, 17, 8, 8};
    p.storage = {ip, ip, ip};
    p.resize_buffers();
    fill_random(p, ++seed);
    out.push_back({fmt::format("inputs_{}", to_string(ip)), std::move(p)});
  }
  return out;
}

}  // namespace attest
