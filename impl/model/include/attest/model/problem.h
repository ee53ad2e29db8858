// The attention problem model shared by kernels, reference and harness (docs/design.md#problem-semantics).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/model/precision.h"

namespace attest {

// Thrown for an invalid problem; the message names the offending field.
class ProblemError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// What a kernel writes for a row that sees no key.
enum class EmptyRowPolicy { kZero, kNan };

struct Shape {
  int batch = 1;      // B
  int heads = 1;      // H, query heads
  int kv_heads = 1;   // Hkv, H % Hkv == 0
  int q_len = 1;      // Tq
  int k_len = 1;      // Tk
  int head_dim = 1;   // Dk
  int value_dim = 1;  // Dv
};

// Every enabled term must allow key j for query i (a conjunction).
struct MaskSpec {
  bool causal = false;
  std::optional<int> window;                // >= 1: key j visible iff qpos - j < window
  std::optional<int> chunk;                 // >= 1: key j visible iff floor(qpos / chunk) == floor(j / chunk)
  std::optional<int> lookahead;             // >= 1: key j visible iff j - qpos < lookahead (1: causal)
  std::vector<int> kv_valid;                // empty or [B]: key j visible iff j < kv_valid[b]
  std::vector<int> q_valid;                 // empty or [B]: query i sees nothing unless i < q_valid[b]
  std::vector<int> q_segment;               // empty or [B][Tq]
  std::vector<int> k_segment;               // empty or [B][Tk] (both or neither)
  std::vector<std::uint8_t> explicit_mask;  // empty or [B][Tq][Tk], nonzero = visible
};

// Rotary position embedding on interleaved pairs (2m, 2m+1), angle pos * base^(-2m/Dk).
struct Rope {
  bool enabled = false;
  double base = 10000.0;
};

// Score modifiers (docs/design.md#score-modifiers): with x = scale * q.k, the logit is
//   s_ij = softcap(x) + alibi[h] * (j - qpos(i)) + bias[b][h][i][j],  softcap(x) = c tanh(x / c),
// then the boolean mask excludes keys (a -inf bias excludes one too). A sink sigma_h joins only the
// softmax denominator: p_ij = exp(s_ij) / (exp(sigma_h) + sum_k exp(s_ik)); a row with a sink and
// no visible key has O = 0 and LSE = sigma_h whatever the empty-row policy.
struct ScoreModifiers {
  std::optional<double> softcap;    // c > 0
  std::vector<float> alibi_slopes;  // empty or [H], one slope per query head
  std::vector<float> bias;          // empty or [B or 1][H or 1][Tq][Tk]: finite or -inf
  bool bias_per_batch = true;       // false: one bias for every batch entry
  bool bias_per_head = true;        // false: one bias for every head
  std::vector<float> sinks;         // empty or [H]

  // Index of bias[b][h][i][j] under the broadcast flags.
  std::size_t bias_index(const Shape& s, int b, int h, int i, int j) const {
    const std::size_t bb = bias_per_batch ? b : 0, hh = bias_per_head ? h : 0;
    return ((bb * (bias_per_head ? s.heads : 1) + hh) * s.q_len + i) * s.k_len + j;
  }
};

struct Problem {
  Shape shape;
  std::optional<double> scale;        // default 1/sqrt(Dk)
  std::optional<long long> q_offset;  // default Tk - Tq (bottom-right alignment)
  MaskSpec mask;
  Rope rope;
  ScoreModifiers modifiers;
  // The formats q, k, v and the bias are stored in: their float values are exactly representable
  // there (a bf16/f16 kernel receives them as 16-bit buffers).
  struct Storage {
    Scalar q = Scalar::kF32, k = Scalar::kF32, v = Scalar::kF32;
    Scalar bias = Scalar::kF32;
    bool operator==(const Storage&) const = default;
  } storage;
  std::vector<float> q;  // [B][H][Tq][Dk]
  std::vector<float> k;  // [B][Hkv][Tk][Dk]
  std::vector<float> v;  // [B][Hkv][Tk][Dv]

  double effective_scale() const;
  long long effective_q_offset() const;
  long long query_position(int i) const { return effective_q_offset() + i; }
  int kv_head_of(int h) const { return h / (shape.heads / shape.kv_heads); }

  std::size_t q_size() const;
  std::size_t k_size() const;
  std::size_t v_size() const;
  std::size_t o_size() const;    // [B][H][Tq][Dv]
  std::size_t lse_size() const;  // [B][H][Tq]

  // Throws ProblemError naming the first invalid field. Buffers must match the shape.
  void validate() const;
  // Allocates zeroed q/k/v buffers of the right size (validates the shape first).
  void resize_buffers();
  // Replaces q, k, v and the bias by the nearest values their storage holds: each value rounded,
  // K and V in a scaled format a row (one token of one head) at a time (quantized.h).
  void fit_to_storage();
};

// Largest element count any one buffer may have; guards size arithmetic against overflow.
inline constexpr std::size_t kMaxBufferElements = std::size_t{1} << 32;

const char* to_string(EmptyRowPolicy p);

}  // namespace attest
