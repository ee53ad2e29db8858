#include "attest/model/problem.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include "attest/model/problem_fields.h"
#include "attest/model/quantized.h"

namespace attest {
namespace {

[[noreturn]] void fail(const std::string& field, const std::string& why) {
  throw ProblemError("invalid problem: " + field + " " + why);
}

void require_positive(const char* field, int value) {
  if (value < 1) fail(field, "must be >= 1, got " + std::to_string(value));
}

void require_positive_shape(const Shape& s) {
  require_positive("shape.batch", s.batch);
  require_positive("shape.heads", s.heads);
  require_positive("shape.kv_heads", s.kv_heads);
  require_positive("shape.q_len", s.q_len);
  require_positive("shape.k_len", s.k_len);
  require_positive("shape.head_dim", s.head_dim);
  require_positive("shape.value_dim", s.value_dim);
}

// Product of sizes, refusing anything that would overflow a buffer index.
std::size_t checked_product(const char* field, std::initializer_list<int> dims) {
  std::size_t total = 1;
  for (int d : dims) {
    if (total > kMaxBufferElements / static_cast<std::size_t>(d)) fail(field, "would need more than 2^32 elements");
    total *= static_cast<std::size_t>(d);
  }
  if (total > kMaxBufferElements) fail(field, "would need more than 2^32 elements");
  return total;
}

void require_size(const char* field, std::size_t actual, std::size_t expected) {
  if (actual != expected)
    fail(field, "has " + std::to_string(actual) + " elements, expected " + std::to_string(expected));
}

// Rows of `width` values (K and V: a token of one head) in storage p; a scaled format is checked a
// group at a time and only K and V may have one.
void require_representable(const char* field, const std::vector<float>& values, Scalar p, int width = 1) {
  if (p == Scalar::kF32) return;
  if (scaled(p)) {
    if (width == 1 && std::string_view(field) != "k" && std::string_view(field) != "v")
      fail(std::string("storage of ") + field, std::string(to_string(p)) + " is a K/V storage format");
    for (std::size_t row = 0; row < values.size(); row += width)
      if (!rows_representable(std::span(values).subspan(row, width), width, p))
        fail(std::string(field) + (p == Scalar::kQ8Head ? " kv head " : " row ") + std::to_string(row / width),
             std::string("is not exactly representable in ") + to_string(p) +
                 " (a scaled format holds its f16 scale times integer codes, one scale per group of values)");
    return;
  }
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!representable(values[i], p))
      fail(std::string(field) + "[" + std::to_string(i) + "]",
           std::string("is not exactly representable in ") + to_string(p));
}

// Checks every field against the range the field list gives it (problem_fields.h), so a new
// field is validated by its line there; checks that relate fields to each other stay below.
struct RangeCheck {
  template <typename T>
  void integer(const char* name, const T& x, long long lo, long long hi, bool = false) {
    if (x < lo || x > hi)
      fail(name, "must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(x));
  }
  template <typename T>
  void optional_integer(const char* name, const std::optional<T>& x, long long lo, long long hi) {
    if (x) integer(name, *x, lo, hi);
  }
  void number(const char* name, double x, bool = false) {
    if (!std::isfinite(x)) fail(name, "must be finite");
  }
  void optional_number(const char* name, const std::optional<double>& x) {
    if (x) number(name, *x);
  }
  void boolean(const char*, bool) {}
  void precision(const char*, Scalar) {}
  void integers(const char* name, const std::vector<int>& x, long long lo, long long hi) {
    for (std::size_t i = 0; i < x.size(); ++i)
      integer((std::string(name) + "[" + std::to_string(i) + "]").c_str(), x[i], lo, hi);
  }
  void flags(const char*, const std::vector<std::uint8_t>&) {}  // nonzero = visible
  void floats(const char*, const std::vector<float>&, bool = false) {}
};

}  // namespace

double Problem::effective_scale() const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
}

long long Problem::effective_q_offset() const {
  return q_offset ? *q_offset : static_cast<long long>(shape.k_len) - shape.q_len;
}

std::size_t Problem::q_size() const {
  return checked_product("shape", {shape.batch, shape.heads, shape.q_len, shape.head_dim});
}
std::size_t Problem::k_size() const {
  return checked_product("shape", {shape.batch, shape.kv_heads, shape.k_len, shape.head_dim});
}
std::size_t Problem::v_size() const {
  return checked_product("shape", {shape.batch, shape.kv_heads, shape.k_len, shape.value_dim});
}
std::size_t Problem::o_size() const {
  return checked_product("shape", {shape.batch, shape.heads, shape.q_len, shape.value_dim});
}
std::size_t Problem::lse_size() const { return checked_product("shape", {shape.batch, shape.heads, shape.q_len}); }

void Problem::validate() const {
  const Shape& s = shape;
  RangeCheck ranges;
  visit_problem_fields(*this, ranges);
  if (s.heads % s.kv_heads != 0)
    fail("shape.kv_heads",
         "must divide shape.heads (" + std::to_string(s.heads) + " % " + std::to_string(s.kv_heads) + " != 0)");
  checked_product("shape", {s.batch, s.heads, s.q_len, s.head_dim});
  checked_product("shape", {s.batch, s.heads, s.q_len, s.value_dim});
  checked_product("shape", {s.batch, s.kv_heads, s.k_len, s.head_dim});
  checked_product("shape", {s.batch, s.kv_heads, s.k_len, s.value_dim});
  checked_product("mask.explicit_mask", {s.batch, s.q_len, s.k_len});

  const MaskSpec& m = mask;
  if (!m.kv_valid.empty()) {
    require_size("mask.kv_valid", m.kv_valid.size(), s.batch);
    for (std::size_t b = 0; b < m.kv_valid.size(); ++b)
      if (m.kv_valid[b] < 0 || m.kv_valid[b] > s.k_len)
        fail("mask.kv_valid[" + std::to_string(b) + "]", "must lie in [0, k_len]");
  }
  if (!m.q_valid.empty()) {
    require_size("mask.q_valid", m.q_valid.size(), s.batch);
    for (std::size_t b = 0; b < m.q_valid.size(); ++b)
      if (m.q_valid[b] < 0 || m.q_valid[b] > s.q_len)
        fail("mask.q_valid[" + std::to_string(b) + "]", "must lie in [0, q_len]");
  }
  if (m.q_segment.empty() != m.k_segment.empty())
    fail(m.q_segment.empty() ? "mask.q_segment" : "mask.k_segment", "must be given together with its partner");
  if (!m.q_segment.empty()) {
    require_size("mask.q_segment", m.q_segment.size(), static_cast<std::size_t>(s.batch) * s.q_len);
    require_size("mask.k_segment", m.k_segment.size(), static_cast<std::size_t>(s.batch) * s.k_len);
  }
  if (!m.explicit_mask.empty())
    require_size("mask.explicit_mask", m.explicit_mask.size(), static_cast<std::size_t>(s.batch) * s.q_len * s.k_len);

  const ScoreModifiers& md = modifiers;
  if (md.softcap && !(*md.softcap > 0)) fail("modifiers.softcap", "must be > 0");
  auto require_finite = [](const char* field, const std::vector<float>& v) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i])) fail(std::string(field) + "[" + std::to_string(i) + "]", "must be finite");
  };
  if (!md.alibi_slopes.empty()) require_size("modifiers.alibi_slopes", md.alibi_slopes.size(), s.heads);
  require_finite("modifiers.alibi_slopes", md.alibi_slopes);
  if (!md.sinks.empty()) require_size("modifiers.sinks", md.sinks.size(), s.heads);
  require_finite("modifiers.sinks", md.sinks);
  if (!md.bias.empty()) {
    require_size("modifiers.bias", md.bias.size(),
                 checked_product("modifiers.bias",
                                 {md.bias_per_batch ? s.batch : 1, md.bias_per_head ? s.heads : 1, s.q_len, s.k_len}));
    for (std::size_t i = 0; i < md.bias.size(); ++i)
      if (std::isnan(md.bias[i]) || md.bias[i] == std::numeric_limits<float>::infinity())
        fail("modifiers.bias[" + std::to_string(i) + "]", "must be finite or -inf");
    require_representable("modifiers.bias", md.bias, storage.bias);
  }
  if (rope.enabled) {
    if (s.head_dim % 2 != 0) fail("rope", "needs an even shape.head_dim");
    if (rope.base <= 1.0) fail("rope.base", "must be > 1");
  }

  require_size("q", q.size(), q_size());
  require_size("k", k.size(), k_size());
  require_size("v", v.size(), v_size());
  require_representable("q", q, storage.q);
  require_representable("k", k, storage.k, fit_width(storage.k, s.k_len, s.head_dim));
  require_representable("v", v, storage.v, fit_width(storage.v, s.k_len, s.value_dim));
}

void Problem::fit_to_storage() {
  for (float& x : q) x = round_to(x, storage.q);
  for (float& x : modifiers.bias) x = round_to(x, storage.bias);
  if (!k.empty()) fit_rows(k, fit_width(storage.k, shape.k_len, shape.head_dim), storage.k);
  if (!v.empty()) fit_rows(v, fit_width(storage.v, shape.k_len, shape.value_dim), storage.v);
}

void Problem::resize_buffers() {
  require_positive_shape(shape);
  q.assign(q_size(), 0.0f);
  k.assign(k_size(), 0.0f);
  v.assign(v_size(), 0.0f);
}

const char* to_string(EmptyRowPolicy p) { return p == EmptyRowPolicy::kZero ? "zero" : "nan"; }

}  // namespace attest
