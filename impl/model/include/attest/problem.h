// The attention problem model shared by kernels, reference and harness (DESIGN.md §2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/precision.h"

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
  std::optional<int> window;           // >= 1: key j visible iff qpos - j < window
  std::optional<int> chunk;            // >= 1: key j visible iff floor(qpos / chunk) == floor(j / chunk)
  std::vector<int> kv_valid;           // empty or [B]: key j visible iff j < kv_valid[b]
  std::vector<int> q_valid;            // empty or [B]: query i sees nothing unless i < q_valid[b]
  std::vector<int> q_segment;          // empty or [B][Tq]
  std::vector<int> k_segment;          // empty or [B][Tk] (both or neither)
  std::vector<std::uint8_t> explicit_mask;  // empty or [B][Tq][Tk], nonzero = visible

  bool any() const;
};

// Rotary position embedding on interleaved pairs (2m, 2m+1), angle pos * base^(-2m/Dk).
struct Rope {
  bool enabled = false;
  double base = 10000.0;
};

struct Problem {
  Shape shape;
  std::optional<double> scale;       // default 1/sqrt(Dk)
  std::optional<long long> q_offset;  // default Tk - Tq (bottom-right alignment)
  MaskSpec mask;
  Rope rope;
  // The formats q, k and v are stored in: their float values are exactly representable there
  // (a bf16/f16 kernel receives them as 16-bit buffers).
  struct Storage {
    Scalar q = Scalar::kF32, k = Scalar::kF32, v = Scalar::kF32;
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
};

// Largest element count any one buffer may have; guards size arithmetic against overflow.
inline constexpr std::size_t kMaxBufferElements = std::size_t{1} << 32;

const char* to_string(EmptyRowPolicy p);

}  // namespace attest
