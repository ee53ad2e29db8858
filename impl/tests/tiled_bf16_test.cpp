// tiled_bf16 on both internal paths against attention computed in double on the same bf16 inputs:
// masks, GQA, RoPE, odd widths and tiles, empty rows, NaN behind masked keys, and magnitudes that
// send tiles from the dot product to the f32 micro-kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "attest/kernels/builtin_kernels.h"
#include "kernel_support.h"
#include "simd_bf16.h"

namespace attest {
namespace {

using kernels::Layout;
using kernels::MaskView;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Problem bf16_problem(Shape shape, std::uint64_t seed, double q_scale = 1.0, double v_scale = 1.0) {
  Problem p;
  p.shape = shape;
  p.storage = {Scalar::kBF16, Scalar::kBF16, Scalar::kBF16};
  p.resize_buffers();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (float& x : p.q) x = round_to(float(unit(rng) * q_scale), Scalar::kBF16);
  for (float& x : p.k) x = round_to(float(unit(rng)), Scalar::kBF16);
  for (float& x : p.v) x = round_to(float(unit(rng) * v_scale), Scalar::kBF16);
  return p;
}

// Attention in double on the problem's values (RoPE rotated in f32, as the kernels do); `spread`
// is sum_j p_j |v_j| per element, the scale of P's rounding.
struct Expected {
  std::vector<double> o, lse, spread;
};

Expected attention_in_double(const Problem& p) {
  const Shape& s = p.shape;
  const Layout at{s};
  const MaskView mask(p);
  Expected e{std::vector<double>(p.o_size()), std::vector<double>(p.lse_size()), std::vector<double>(p.o_size())};
  std::vector<float> q(s.head_dim), k(s.head_dim);
  std::vector<double> score(s.k_len);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < s.q_len; ++i) {
        std::copy_n(&p.q[at.q(b, h, i)], s.head_dim, q.begin());
        if (p.rope.enabled) kernels::rope_rotate(q.data(), s.head_dim, mask.position(i), p.rope.base);
        double max = kNegInf;
        for (int j = 0; j < s.k_len; ++j) {
          score[j] = kNegInf;
          if (!mask.visible(b, i, j)) continue;
          std::copy_n(&p.k[at.k(b, p.kv_head_of(h), j)], s.head_dim, k.begin());
          if (p.rope.enabled) kernels::rope_rotate(k.data(), s.head_dim, j, p.rope.base);
          double dot = 0;
          for (int d = 0; d < s.head_dim; ++d) dot += double(q[d]) * k[d];
          score[j] = dot * p.effective_scale();
          max = std::max(max, score[j]);
        }
        double sum = 0;
        for (int j = 0; j < s.k_len; ++j) sum += score[j] == kNegInf ? 0.0 : std::exp(score[j] - max);
        e.lse[at.lse(b, h, i)] = max == kNegInf ? kNegInf : max + std::log(sum);
        for (int j = 0; j < s.k_len; ++j) {
          if (score[j] == kNegInf) continue;
          const double w = std::exp(score[j] - max) / sum;
          for (int d = 0; d < s.value_dim; ++d) {
            const double v = p.v[at.v(b, p.kv_head_of(h), j) + d];
            e.o[at.o(b, h, i) + d] += w * v;
            e.spread[at.o(b, h, i) + d] += w * std::fabs(v);
          }
        }
      }
  return e;
}

// Within P's and O's bf16 roundings (u = 2^-8 each, doubled for slack) of the double result, or
// exactly the zero policy on empty rows; `absolute` covers bf16's subnormal spacing.
void expect_close(const Problem& p, const Outputs& got, const std::string& label, double absolute = 0.0) {
  const Expected want = attention_in_double(p);
  for (std::size_t row = 0; row < want.lse.size(); ++row) {
    if (want.lse[row] == kNegInf) {
      ASSERT_EQ(got.lse[row], -std::numeric_limits<float>::infinity()) << label << " row " << row;
      for (int d = 0; d < p.shape.value_dim; ++d) ASSERT_EQ(got.o[row * p.shape.value_dim + d], 0.0f) << label;
      continue;
    }
    ASSERT_NEAR(got.lse[row], want.lse[row], 1e-5 * (std::fabs(want.lse[row]) + 1)) << label << " row " << row;
    for (int d = 0; d < p.shape.value_dim; ++d) {
      const std::size_t e = row * p.shape.value_dim + d;
      ASSERT_NEAR(got.o[e], want.o[e], 0x1p-7 * (want.spread[e] + std::fabs(want.o[e])) + absolute)
          << label << " row " << row << " col " << d;
    }
  }
}

std::vector<std::unique_ptr<Kernel>> both_paths() {
  std::vector<std::unique_ptr<Kernel>> k;
  k.push_back(make_tiled_bf16_kernel({128, 64}, Bf16Path::kAuto));
  k.push_back(make_tiled_bf16_kernel({128, 64}, Bf16Path::kPortable));
  return k;
}

TEST(TiledBf16, ReportsItsPath) {
  const auto kernels = both_paths();
  EXPECT_EQ(kernels[0]->last_path(), kernels::bf16::has_dot_products() ? "avx512bf16" : "portable");
  EXPECT_EQ(kernels[1]->last_path(), "portable");
  const Precision declared = kernels[0]->capabilities().precision;
  EXPECT_EQ(declared.summary(), "q/k/v/o bf16, scores f32, P bf16, accumulator f32");
  EXPECT_EQ(kernels[0]->capabilities().contract.query_tile, 128);
  EXPECT_EQ(kernels[0]->capabilities().contract.key_tile, 64);
}

TEST(TiledBf16, BothPathsMatchDoubleAttentionOnBf16Inputs) {
  std::vector<std::pair<std::string, Problem>> cases;
  cases.emplace_back("gqa_odd_widths", bf16_problem({2, 4, 2, 70, 130, 7, 17}, 1));
  Problem causal = bf16_problem({1, 2, 1, 129, 200, 64, 64}, 2);
  causal.mask.causal = true;
  causal.mask.kv_valid = {150};
  cases.emplace_back("causal_key_padding", causal);
  Problem window = bf16_problem({1, 1, 1, 33, 65, 16, 80}, 3);
  window.mask.window = 20;
  window.rope.enabled = true;
  cases.emplace_back("window_rope", window);
  Problem empty = bf16_problem({1, 1, 1, 10, 40, 32, 128}, 4);
  empty.mask.q_valid = {6};
  cases.emplace_back("empty_rows", empty);
  Problem segments = bf16_problem({1, 1, 1, 80, 80, 64, 64}, 5);
  for (int t = 0; t < 80; ++t) segments.mask.q_segment.push_back(t / 30), segments.mask.k_segment.push_back(t / 30);
  cases.emplace_back("segments", segments);
  for (const auto& [name, p] : cases)
    for (const auto& kernel : both_paths()) expect_close(p, run_forward(*kernel, p), name + " " + kernel->last_path());
}

// Score modifiers on both paths: softcap, ALiBi of both signs, a bias with -inf entries (whole
// key tiles of some rows included) and sinks, past the first query and key tiles.
TEST(TiledBf16, BothPathsTakeScoreModifiers) {
  Problem p = bf16_problem({1, 2, 1, 130, 140, 64, 64}, 8);
  p.mask.causal = true;
  p.modifiers.softcap = 20.0;
  p.modifiers.alibi_slopes = {0.25f, -0.125f};
  p.modifiers.bias_per_batch = p.modifiers.bias_per_head = false;
  p.modifiers.bias.resize(std::size_t(130) * 140);
  for (int i = 0; i < 130; ++i)
    for (int j = 0; j < 140; ++j)
      p.modifiers.bias[std::size_t(i) * 140 + j] =
          (j % 7 == 3 || (i % 5 == 0 && j >= 64 && j < 128)) ? -INFINITY : 0.01f * float((i + 3 * j) % 11);
  p.modifiers.sinks = {0.5f, -2.0f};
  // The f32 loop kernel on the same bf16 inputs; the bf16 kernel differs by P's and O's roundings.
  const Outputs want = run_forward(*make_kernel("loop"), p);
  float v_max = 0;
  for (float v : p.v) v_max = std::max(v_max, std::fabs(v));
  for (const auto& kernel : both_paths()) {
    ASSERT_TRUE(kernel->capabilities().supports(p)) << kernel->capabilities().unsupported_because(p);
    const Outputs got = run_forward(*kernel, p);
    for (std::size_t e = 0; e < want.o.size(); ++e)
      ASSERT_NEAR(got.o[e], want.o[e], 0x1p-6 * v_max) << kernel->last_path() << " element " << e;
    for (std::size_t row = 0; row < want.lse.size(); ++row)
      ASSERT_NEAR(got.lse[row], want.lse[row], 1e-3 * (std::fabs(want.lse[row]) + 1))
          << kernel->last_path() << " row " << row;
  }
}

TEST(TiledBf16, NanBehindMaskedKeysNeverLeaks) {
  Problem p = bf16_problem({1, 2, 1, 100, 150, 64, 64}, 6);
  p.mask.causal = true;
  p.mask.kv_valid = {120};
  const Problem clean = p;
  for (int j = 120; j < 150; ++j)
    for (int d = 0; d < 64; ++d) p.v[std::size_t(j) * 64 + d] = p.k[std::size_t(j) * 64 + d] = NAN;
  for (const auto& kernel : both_paths()) {
    const Outputs out = run_forward(*kernel, p);
    for (float x : out.o) ASSERT_TRUE(std::isfinite(x)) << kernel->last_path();
    expect_close(clean, out, "nan_masked " + kernel->last_path());
  }
}

// One query q = 1 against keys k (Dk = Dv = 1, scale 1): the scores are k, the output sum_j p_j v_j.
Problem one_query(const std::vector<float>& k, const std::vector<float>& v) {
  Problem p = bf16_problem({1, 1, 1, 1, int(k.size()), 1, 1}, 0);
  p.scale = 1.0;
  p.q = {1.0f};
  p.k = k;
  p.v = v;
  return p;
}

TEST(TiledBf16, MagnitudesTheDotProductWouldFlushKeepGradualUnderflow) {
  // Subnormal V (bf16 keeps subnormals down to 2^-133), tiny Q, logits far apart.
  const Problem tiny_v = bf16_problem({1, 1, 1, 40, 100, 64, 64}, 7, 1.0, 0x1p-128);
  const Problem tiny_q = bf16_problem({1, 1, 1, 40, 100, 64, 64}, 8, 0x1p-60);
  const Problem far_logits = bf16_problem({1, 1, 1, 40, 200, 64, 64}, 9, 300.0, 0x1p-100);
  // A weight e^-88 below f32's normal range (the conversion to bf16 would flush it) on a large V.
  const Problem subnormal_weight = one_query({0.0f, -88.0f}, {0.0f, 0x1p100f});
  // A key tile whose rescaled accumulator, e^-88, is subnormal (the dot product would flush it).
  std::vector<float> k(65, -1000.0f), v(65, 0.0f);
  k[0] = 0.0f, v[0] = 1.0f, k[64] = 88.0f;
  const Problem subnormal_accumulator = one_query(k, v);
  for (const auto& kernel : both_paths()) {
    const std::string path = kernel->last_path();
    expect_close(tiny_v, run_forward(*kernel, tiny_v), "tiny_v " + path, 0x1p-133);
    expect_close(tiny_q, run_forward(*kernel, tiny_q), "tiny_q " + path);
    expect_close(far_logits, run_forward(*kernel, far_logits), "far_logits " + path, 0x1p-133);
    expect_close(subnormal_weight, run_forward(*kernel, subnormal_weight), "subnormal_weight " + path, 0x1p-133);
    expect_close(subnormal_accumulator, run_forward(*kernel, subnormal_accumulator), "subnormal_accumulator " + path,
                 0x1p-133);
  }
}

}  // namespace
}  // namespace attest
