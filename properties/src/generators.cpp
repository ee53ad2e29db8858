#include "attest/generators.h"

#include <cmath>
#include <functional>
#include <random>

namespace attest {
namespace {

// Every generator below maps shrinkable integers (RapidCheck shrinks them towards 0) to biased
// values, so that shrinking always moves towards the smallest, simplest choice. Choices are
// drawn at full size: RapidCheck's growing size would otherwise keep early cases mask-free.

rc::Gen<int> choice(int lo, int hi) { return rc::gen::resize(100, rc::gen::inRange(lo, hi)); }

// Lengths biased to where kernels break: tiny, tile (32) and page (16) sizes +-1, and anything.
rc::Gen<int> gen_length() {
  static const int kEdges[] = {15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65};
  return rc::gen::map(rc::gen::pair(choice(0, 9), choice(0, 720)), [](std::pair<int, int> kv) {
    const auto [kind, value] = kv;
    if (kind < 4) return 1 + value % 9;
    if (kind < 7) return kEdges[value % 12];
    return 1 + value % 72;
  });
}

rc::Gen<int> gen_width() {
  return rc::gen::map(rc::gen::pair(choice(0, 4), choice(0, 72)), [](std::pair<int, int> kv) {
    return kv.first < 3 ? 1 + kv.second % 9 : (kv.second % 2 ? 32 : 16);
  });
}

// True with probability in_ten / 10; shrinks to false.
rc::Gen<bool> sometimes(int in_ten) {
  return rc::gen::map(choice(0, 10), [=](int x) { return x >= 10 - in_ten; });
}

// `zero_weight` times in `total` 0; otherwise a value of `rest` (index from 0); shrinks to 0.
rc::Gen<int> mostly_zero(int zero_weight, int total, std::function<int(int)> rest) {
  return rc::gen::map(choice(0, total), [=](int x) { return x < zero_weight ? 0 : rest(x - zero_weight); });
}

std::vector<int> segment_ids(int len, std::mt19937_64& rng) {
  std::vector<int> ids;
  int id = 0;
  for (int t = 0; t < len; ++t) {
    if (t > 0 && rng() % 6 == 0) ++id;
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

Problem build_problem(const ProblemSpec& spec) {
  Problem p;
  const auto [heads, kv_heads] = kHeadConfigs[spec.head_config];
  const int head_dim = spec.rope ? spec.head_dim + spec.head_dim % 2 : spec.head_dim;
  p.shape = {spec.batch, heads, kv_heads, spec.q_len, spec.k_len, head_dim, spec.value_dim};
  p.input_precision = static_cast<InputPrecision>(spec.input_precision);
  p.rope.enabled = spec.rope;
  MaskSpec& m = p.mask;
  m.causal = spec.causal;
  if (spec.window > 0) m.window = spec.window;
  if (spec.q_offset_mode == 1) p.q_offset = 0;
  if (spec.q_offset_mode == 2) p.q_offset = spec.q_offset_value;

  std::mt19937_64 mask_rng(spec.mask_seed);
  const int tq = spec.q_len, tk = spec.k_len;
  for (int b = 0; b < spec.batch; ++b) {
    // Lengths anywhere in [0, T], zero included: batches without keys make empty rows.
    if (spec.key_padding) m.kv_valid.push_back(static_cast<int>(mask_rng() % (tk + 1)));
    if (spec.query_padding) m.q_valid.push_back(static_cast<int>(mask_rng() % (tq + 1)));
    if (spec.segments) {
      const std::vector<int> qs = segment_ids(tq, mask_rng), ks = segment_ids(tk, mask_rng);
      m.q_segment.insert(m.q_segment.end(), qs.begin(), qs.end());
      m.k_segment.insert(m.k_segment.end(), ks.begin(), ks.end());
    }
  }
  if (spec.explicit_mask) {
    const int keep_percent[] = {90, 50, 10};
    m.explicit_mask.resize(std::size_t(spec.batch) * tq * tk);
    for (auto& x : m.explicit_mask) x = static_cast<int>(mask_rng() % 100) < keep_percent[spec.explicit_density];
  }

  const double scales[] = {0.0, 1.0, 0.05, -0.7, 3.0};
  if (spec.scale_mode > 0) p.scale = scales[spec.scale_mode];

  p.resize_buffers();
  std::mt19937_64 data_rng(spec.data_seed);
  std::uniform_real_distribution<double> unit(-std::sqrt(3.0), std::sqrt(3.0));
  // Logits ~ |scale| * Dk * qk_mag^2; choose qk_mag so that they are ~ 10^logit_exponent.
  double qk = std::pow(10.0, spec.logit_exponent / 2.0) * std::pow(double(head_dim), -0.25);
  double vm = std::pow(10.0, spec.value_exponent);
  if (p.input_precision == InputPrecision::kF16) {  // stay inside fp16's range (65504)
    qk = std::min(qk, 100.0);
    vm = std::min(vm, 1000.0);
  }
  for (float& x : p.q) x = round_to(static_cast<float>(unit(data_rng) * qk), p.input_precision);
  for (float& x : p.k) x = round_to(static_cast<float>(unit(data_rng) * qk), p.input_precision);
  for (float& x : p.v) x = round_to(static_cast<float>(unit(data_rng) * vm), p.input_precision);
  return p;
}

rc::Gen<ProblemSpec> gen_spec(const ProblemNeeds& needs) {
  const auto inRange = choice;
  using rc::gen::just;
  using rc::gen::set;
  const bool free = needs.position_free;
  static const int kGqaConfigs[] = {2, 3, 4, 5, 7};  // indices of kHeadConfigs with Hkv < H
  const rc::Gen<int> head_config =
      needs.gqa ? rc::gen::map(inRange(0, 5), [](int i) { return kGqaConfigs[i]; }) : inRange(0, 8);
  const rc::Gen<bool> off = just(false);
  const rc::Gen<int> k_len = needs.max_keys > 0
                                 ? rc::gen::map(gen_length(), [=](int t) { return std::min(t, needs.max_keys); })
                                 : gen_length();
  return rc::gen::build<ProblemSpec>(
      set(&ProblemSpec::batch, inRange(1, 4)),
      set(&ProblemSpec::head_config, head_config),
      set(&ProblemSpec::q_len, gen_length()),
      set(&ProblemSpec::k_len, k_len),
      set(&ProblemSpec::head_dim, gen_width()),
      set(&ProblemSpec::value_dim, gen_width()),
      set(&ProblemSpec::causal, free ? off : sometimes(5)),
      set(&ProblemSpec::window, free ? just(0) : mostly_zero(120, 160, [](int x) { return 1 + x; })),
      set(&ProblemSpec::q_offset_mode, mostly_zero(6, 9, [](int x) { return x < 2 ? 1 : 2; })),
      set(&ProblemSpec::q_offset_value, inRange(-8, 80)),
      set(&ProblemSpec::key_padding, free ? off : sometimes(3)),
      set(&ProblemSpec::query_padding, free ? off : sometimes(2)),
      set(&ProblemSpec::segments, sometimes(2)),
      set(&ProblemSpec::explicit_mask, sometimes(2)),
      set(&ProblemSpec::explicit_density, inRange(0, 3)),
      set(&ProblemSpec::rope, needs.rope ? just(true) : free ? off : sometimes(2)),
      set(&ProblemSpec::input_precision, mostly_zero(6, 8, [](int x) { return 1 + x; })),
      // Logits mostly near 1, sometimes 1e-3 to 1e4, sometimes up to 1e30.
      set(&ProblemSpec::logit_exponent, mostly_zero(40, 90, [](int x) { return x < 30 ? x % 8 - 3 : 4 + x % 27; })),
      set(&ProblemSpec::value_exponent, mostly_zero(80, 90, [](int x) { return -30 + 6 * x; })),
      set(&ProblemSpec::scale_mode, mostly_zero(30, 34, [](int x) { return 1 + x; })),
      set(&ProblemSpec::mask_seed, rc::gen::arbitrary<std::uint64_t>()),
      set(&ProblemSpec::data_seed, rc::gen::arbitrary<std::uint64_t>()));
}

std::vector<std::string> labels_of(const Problem& p) {
  std::vector<std::string> labels;
  const Shape& s = p.shape;
  labels.push_back(s.q_len < s.k_len ? "tq<tk" : s.q_len > s.k_len ? "tq>tk" : "tq=tk");
  if (s.kv_heads < s.heads) labels.push_back("gqa");
  if (p.mask.causal) labels.push_back("causal");
  if (p.mask.window) labels.push_back("window");
  if (!p.mask.kv_valid.empty() || !p.mask.q_valid.empty()) labels.push_back("padding");
  if (!p.mask.q_segment.empty()) labels.push_back("segments");
  if (!p.mask.explicit_mask.empty()) labels.push_back("explicit");
  if (p.rope.enabled) labels.push_back("rope");
  if (p.input_precision != InputPrecision::kF32) labels.push_back(to_string(p.input_precision));
  return labels;
}

}  // namespace attest
