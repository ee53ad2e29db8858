// Exact attention, templated on the scalar. Written without any kernel helper: the mask
// is built by clearing keys term by term, RoPE as a complex rotation in the scalar type.
#pragma once

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "attest/reference/reference.h"

namespace attest::reference_detail {

// Which chunk of size c position x belongs to (rounding towards minus infinity).
inline long long chunk_of(long long x, long long c) {
  long long q = x / c;
  if (x % c != 0 && x < 0) --q;
  return q;
}

// Which keys of batch b query row i may see (in head h; h < 0: in any head): start with all,
// clear what each term forbids. A -inf bias forbids a key like a mask term.
inline void visible_keys_of_row(const Problem& p, int b, int i, std::vector<char>& allowed, int h = -1) {
  const int tq = p.shape.q_len, tk = p.shape.k_len;
  const long long offset = p.q_offset.has_value() ? *p.q_offset : static_cast<long long>(tk) - tq;
  const long long pos = offset + i;
  allowed.assign(tk, 1);
  const MaskSpec& m = p.mask;
  if (!m.q_valid.empty() && !(i < m.q_valid[b])) allowed.assign(tk, 0);
  for (int j = 0; j < tk; ++j) {
    if (m.causal && static_cast<long long>(j) > pos) allowed[j] = 0;
    if (m.window.has_value() && pos - j >= *m.window) allowed[j] = 0;
    if (m.chunk.has_value() && chunk_of(pos, *m.chunk) != chunk_of(j, *m.chunk)) allowed[j] = 0;
    if (m.lookahead.has_value() && j - pos >= *m.lookahead) allowed[j] = 0;
    if (!m.kv_valid.empty() && !(j < m.kv_valid[b])) allowed[j] = 0;
    if (!m.q_segment.empty() && m.q_segment[b * tq + i] != m.k_segment[b * tk + j]) allowed[j] = 0;
    if (!m.explicit_mask.empty() && m.explicit_mask[(static_cast<std::size_t>(b) * tq + i) * tk + j] == 0)
      allowed[j] = 0;
    const ScoreModifiers& md = p.modifiers;
    if (!md.bias.empty() && allowed[j]) {
      bool any_head = false;
      for (int hh = h < 0 ? 0 : h; hh < (h < 0 ? p.shape.heads : h + 1); ++hh)
        any_head = any_head || md.bias[md.bias_index(p.shape, b, hh, i, j)] != -std::numeric_limits<float>::infinity();
      if (!any_head) allowed[j] = 0;
    }
  }
}

// tanh in a scalar type that may lack it: (1 - e^{-2|x|}) / (1 + e^{-2|x|}), by Taylor near 0
// where that difference would cancel.
template <typename Real>
Real tanh_of(const Real& x) {
  using std::abs, std::exp;
  const Real a = abs(x);
  Real t;
  if (a < Real(0x1p-8)) {
    const Real a2 = a * a;
    t = a * (Real(1) - a2 * (Real(1) / Real(3) -
                             a2 * (Real(2) / Real(15) - a2 * (Real(17) / Real(315) - a2 * Real(62) / Real(2835)))));
  } else {
    const Real e = exp(Real(-2) * a);
    t = (Real(1) - e) / (Real(1) + e);
  }
  return x < Real(0) ? -t : t;
}

// acc += a * b; a scalar type may provide a faster fused form (found by argument lookup).
template <typename Real>
void accumulate_product(Real& acc, const Real& a, const Real& b) {
  acc += a * b;
}

// acc += a * b where a and b hold float values (no RoPE): their product is exact in double, so a
// scalar type may skip the product's rounding error (found by argument lookup; the same sum).
template <typename Real>
void accumulate_float_product(Real& acc, const Real& a, const Real& b) {
  accumulate_product(acc, a, b);
}

template <typename Real>
struct Rotated {
  std::vector<Real> re, im;  // pair m of a vector as the complex number re[m] + i im[m]
  bool floats = false;       // every part a float's value (not rotated)
};

// A vector as Dk/2 complex pairs, rotated by pos * base^(-2m/Dk) when RoPE is on.
template <typename Real>
Rotated<Real> as_complex(const float* x, int dk, long long pos, const Rope& rope) {
  Rotated<Real> r;
  const int pairs = (dk + 1) / 2;
  r.re.resize(pairs);
  r.im.resize(pairs);
  for (int m = 0; m < pairs; ++m) {
    Real a = x[2 * m];
    Real b = 2 * m + 1 < dk ? Real(x[2 * m + 1]) : Real(0);
    if (rope.enabled) {
      using std::cos, std::pow, std::sin;
      Real angle = Real(pos) * pow(Real(rope.base), Real(-2 * m) / Real(dk));
      Real c = cos(angle), s = sin(angle);
      r.re[m] = a * c - b * s;
      r.im[m] = a * s + b * c;
    } else {
      r.re[m] = a;
      r.im[m] = b;
    }
  }
  r.floats = !rope.enabled;
  return r;
}

// <q, k> of two rotated vectors in four partial sums: each sum's renormalisation waits on the
// previous one, so a single sum is latency-bound; four run side by side (3x faster in double-double)
// and a sum of n/4 terms loses no more than one of n.
template <typename Real, void (*accumulate)(Real&, const Real&, const Real&)>
Real dot_parts(const Rotated<Real>& q, const Rotated<Real>& k) {
  Real part[4] = {Real(0), Real(0), Real(0), Real(0)};
  const std::size_t n = q.re.size();
  std::size_t m = 0;
  for (; m + 1 < n; m += 2) {
    accumulate(part[0], q.re[m], k.re[m]);
    accumulate(part[1], q.im[m], k.im[m]);
    accumulate(part[2], q.re[m + 1], k.re[m + 1]);
    accumulate(part[3], q.im[m + 1], k.im[m + 1]);
  }
  if (m < n) {
    accumulate(part[0], q.re[m], k.re[m]);
    accumulate(part[1], q.im[m], k.im[m]);
  }
  return (part[0] + part[2]) + (part[1] + part[3]);
}

template <typename Real>
void accumulate_any(Real& acc, const Real& a, const Real& b) {
  accumulate_product(acc, a, b);
}
template <typename Real>
void accumulate_floats(Real& acc, const Real& a, const Real& b) {
  accumulate_float_product(acc, a, b);
}

template <typename Real>
Real dot(const Rotated<Real>& q, const Rotated<Real>& k) {
  if (q.floats && k.floats) return dot_parts<Real, accumulate_floats<Real>>(q, k);
  return dot_parts<Real, accumulate_any<Real>>(q, k);
}

// acc[r] += w * v[r] where v[r] is not 0 (a scalar type may provide a faster form).
template <typename Real>
void accumulate_weighted(Real* acc, const Real& w, const float* v, int n) {
  for (int r = 0; r < n; ++r)
    if (v[r] != 0.0f) accumulate_product(acc[r], w, Real(v[r]));
}

// The dot products of a query row with the keys, one key at a time (a scalar type may bring a
// faster way to the same bits: FourKeyDots).
template <typename Real>
struct OneKeyDots {
  void assign(const std::vector<Rotated<Real>>&) {}
  // out[j] = dot(q, keys[j]) for every allowed key j.
  void dots(const Rotated<Real>& q, const std::vector<Rotated<Real>>& keys, const std::vector<char>& allowed,
            std::vector<Real>& out) const {
    for (std::size_t j = 0; j < keys.size(); ++j)
      if (allowed[j]) out[j] = dot(q, keys[j]);
  }
};

// How a worker thread runs its rows: in the code its entry was compiled as (a clone passes its
// own, so that its threads run its code too: reference.cpp's CloneWorkers).
struct PlainWorkers {
  template <typename Body>
  void operator()(Body& body, int job) const {
    body(job);
  }
};

// Frees what a worker thread's MPFR calls cached; called before the thread ends.
void release_thread_caches();

// Per-thread working space of one row's computation.
template <typename Real>
struct RowScratch {
  std::vector<char> allowed;
  std::vector<Real> dots, logit, weight, numerator;
  std::vector<double> cond;
};

// sum |q||k| over a key's components; with RoPE pairwise (|q0|+|q1|)(|k0|+|k1|), which bounds
// the rotated products. Times |scale| it is the logit's condition number A_j.
inline double abs_dot(const float* qrow, const float* krow, int dk, bool rope) {
  double a = 0;
  if (rope) {
    for (int m = 0; m + 1 < dk; m += 2)
      a += (std::fabs(double(qrow[m])) + std::fabs(double(qrow[m + 1]))) *
           (std::fabs(double(krow[m])) + std::fabs(double(krow[m + 1])));
  } else {
    for (int m = 0; m < dk; ++m) a += std::fabs(double(qrow[m]) * double(krow[m]));
  }
  return a;
}

// The bound's bookkeeping of one key of weight pj (pc = pj A_j, pd = pj |s_j - max|) over a row's
// value columns starting at `at`, in double, in a plain loop the compiler vectorizes.
inline void add_key_to_bound_terms(Reference& ref, std::size_t at, const float* vrow, int dv, double pj, double pc,
                                   double pd) {
  // Distinct rows of distinct buffers: restrict lets the loop run in vector registers.
  double* __restrict spread = &ref.spread[at];
  double* __restrict spread_cond = &ref.spread_cond[at];
  double* __restrict spread_logit = &ref.spread_logit[at];
  double* __restrict vmax_abs = &ref.max_abs_value[at];
  double* __restrict vmin = &ref.value_min[at];
  double* __restrict vmax = &ref.value_max[at];
  for (int r = 0; r < dv; ++r) {
    const double v = vrow[r], av = std::fabs(v);
    spread[r] += pj * av;
    spread_cond[r] += pc * av;
    spread_logit[r] += pd * av;
    vmax_abs[r] = vmax_abs[r] > av ? vmax_abs[r] : av;
    vmin[r] = vmin[r] < v ? vmin[r] : v;
    vmax[r] = vmax[r] > v ? vmax[r] : v;
  }
}

// One query row (b, h, i) of the reference, written into ref's row `row`. `keys` are the kv
// head's keys as complex pairs (rotated when RoPE is on).
template <typename Real, typename KeyDots>
void compute_row(const Problem& p, const ReferenceOptions& options, int b, int h, int i, const Real& scale,
                 const std::vector<Rotated<Real>>& keys, const KeyDots& key_dots, RowScratch<Real>& w, Reference& ref) {
  const Shape& s = p.shape;
  const int tq = s.q_len, tk = s.k_len, dk = s.head_dim, dv = s.value_dim;
  const int hk = h / (s.heads / s.kv_heads);
  const long long offset = p.q_offset.has_value() ? *p.q_offset : static_cast<long long>(tk) - tq;
  const float* kbase = &p.k[(std::size_t(b) * s.kv_heads + hk) * tk * dk];
  const float* vbase = &p.v[(std::size_t(b) * s.kv_heads + hk) * tk * dv];
  const std::size_t row = (std::size_t(b) * s.heads + h) * tq + i;
  std::vector<char>& allowed = w.allowed;
  std::vector<Real>& logit = w.logit;
  std::vector<Real>& weight = w.weight;
  std::vector<Real>& numerator = w.numerator;
  std::vector<double>& cond = w.cond;
  w.dots.resize(tk);
  logit.resize(tk);
  weight.resize(tk);
  numerator.resize(dv);
  cond.resize(tk);

  visible_keys_of_row(p, b, i, allowed, h);
  const ScoreModifiers& md = p.modifiers;
  const bool has_sink = !md.sinks.empty();
  if (options.weights) std::copy(allowed.begin(), allowed.end(), ref.visible.begin() + row * tk);
  int count = 0;
  for (char a : allowed) count += a;
  ref.visible_keys[row] = count;
  if (count == 0) {
    ref.empty[row] = 1;
    // With a sink the row is defined: O = 0 and LSE = sigma_h, whatever the policy.
    ref.lse[row] = has_sink ? double(md.sinks[h]) : -std::numeric_limits<double>::infinity();
    for (int r = 0; r < dv; ++r) ref.o[row * dv + r] = 0.0;
    return;
  }
  const float* qrow = &p.q[row * dk];
  const Rotated<Real> query = as_complex<Real>(qrow, dk, offset + i, p.rope);

  // Logits s_j = scale * <q, k_j> and condition numbers A_j = |scale| * sum |q||k|
  // (with RoPE, pairwise (|q0|+|q1|)(|k0|+|k1|), which bounds the rotated products).
  Real max_logit = 0;
  bool have_max = false;
  key_dots.dots(query, keys, allowed, w.dots);
  for (int j = 0; j < tk; ++j) {
    if (!allowed[j]) continue;
    const Real acc = w.dots[j];
    // The modifiers, each in the scalar type: softcap, ALiBi's distance term, the bias.
    Real x = acc * scale;
    double modifier_size = 0;  // what the kernel adds to a logit in float: it enters the bound
    if (md.softcap) {
      const Real c(*md.softcap);
      x = c * tanh_of(x / c);
      modifier_size += 4 * std::fabs(static_cast<double>(x));  // tanh evaluated in float
    }
    if (!md.alibi_slopes.empty()) {
      const Real term = Real(md.alibi_slopes[h]) * Real(static_cast<double>(j - (offset + i)));
      x += term;
      modifier_size += std::fabs(static_cast<double>(term));
    }
    if (!md.bias.empty()) {
      const float bias = md.bias[md.bias_index(s, b, h, i, j)];
      x += Real(bias);
      modifier_size += std::fabs(double(bias));
    }
    logit[j] = x;
    if (!have_max || logit[j] > max_logit) max_logit = logit[j];
    have_max = true;
    const double a = abs_dot(qrow, kbase + std::size_t(j) * dk, dk, p.rope.enabled);
    // Folded into A_j so the bound's gamma(d + 2) A_j term covers a few roundings of each
    // modifier's size too (gamma(d + 2) >= (d + 2) u).
    cond[j] = a * std::fabs(static_cast<double>(scale));
    if (modifier_size > 0) cond[j] += (modifier_size + std::fabs(static_cast<double>(x))) * 4.0 / (dk + 2);
  }
  // A sink is one more term of the denominator: it takes part in the max like any logit.
  const Real sink = has_sink ? Real(md.sinks[h]) : Real(0);
  if (has_sink && sink > max_logit) max_logit = sink;

  Real total = 0;
  Real sink_weight = 0;
  if (has_sink) {
    using std::exp;
    sink_weight = exp(sink - max_logit);
    total += sink_weight;
  }
  for (int j = 0; j < tk; ++j) {
    if (!allowed[j]) continue;
    using std::exp;
    weight[j] = exp(logit[j] - max_logit);
    total += weight[j];
  }
  for (int r = 0; r < dv; ++r) numerator[r] = 0;
  double mean_cond = 0, spread_logit = 0, cond_max = 0, logit_range = 0;
  if (has_sink) {  // a key of value 0 and no dot product: it counts in the logit terms only
    using std::abs;
    const double ps = static_cast<double>(sink_weight / total), dist = static_cast<double>(abs(sink - max_logit));
    spread_logit += ps * dist;
    logit_range = std::max(logit_range, dist);
    ref.visible_keys[row] = count + 1;
    // ... and a point of the hull: O is a convex combination of the values and the sink's 0, so a
    // kernel whose logits err by more than their distance to sigma may land anywhere down to 0.
    for (int r = 0; r < dv; ++r) {
      ref.value_min[row * dv + r] = std::min(ref.value_min[row * dv + r], 0.0);
      ref.value_max[row * dv + r] = std::max(ref.value_max[row * dv + r], 0.0);
    }
  }
  // One division per row, a product per key: double-double's division costs several products
  // (its reciprocal's error, a few units of 2^-106, is far below the 100 bits the bound counts).
  const Real inverse_total = Real(1) / total;
  for (int j = 0; j < tk; ++j) {
    if (!allowed[j]) continue;
    weight[j] *= inverse_total;
    const double pj = static_cast<double>(weight[j]);
    using std::abs;
    const double dist = static_cast<double>(abs(logit[j] - max_logit));
    mean_cond += pj * cond[j];
    spread_logit += pj * dist;
    cond_max = std::max(cond_max, cond[j]);
    logit_range = std::max(logit_range, dist);
    if (options.weights) ref.weights[row * tk + j] = pj;
    const float* vrow = vbase + std::size_t(j) * dv;
    accumulate_weighted(numerator.data(), weight[j], vrow, dv);
    add_key_to_bound_terms(ref, row * dv, vrow, dv, pj, pj * cond[j], pj * dist);
  }
  for (int r = 0; r < dv; ++r) {
    ref.o[row * dv + r] = static_cast<double>(numerator[r]);
    ref.o_residual[row * dv + r] = static_cast<double>(numerator[r] - Real(ref.o[row * dv + r]));
  }
  using std::log;
  const Real lse = max_logit + log(total);
  ref.lse[row] = static_cast<double>(lse);
  ref.lse_residual[row] = static_cast<double>(lse - Real(ref.lse[row]));
  ref.cond_max[row] = cond_max;
  ref.mean_cond[row] = mean_cond;
  ref.logit_spread[row] = spread_logit;
  ref.logit_range[row] = logit_range;
}

// The query rows to compute: options.query_rows (checked), or all.
inline std::vector<int> selected_query_rows(const Problem& p, const ReferenceOptions& options) {
  std::vector<int> rows = options.query_rows;
  if (rows.empty()) {
    rows.resize(p.shape.q_len);
    for (int i = 0; i < p.shape.q_len; ++i) rows[i] = i;
    return rows;
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  if (rows.front() < 0 || rows.back() >= p.shape.q_len)
    throw std::invalid_argument("reference: query_rows holds a row outside [0, Tq)");
  return rows;
}

template <typename Real, typename KeyDots = OneKeyDots<Real>, typename Workers = PlainWorkers>
Reference compute(const Problem& p, ReferenceOptions options, int bits, KeyDots key_dots = {}, Workers workers = {}) {
  p.validate();
  const Shape& s = p.shape;
  const int tq = s.q_len, tk = s.k_len, dk = s.head_dim, dv = s.value_dim;
  const int group = s.heads / s.kv_heads;
  using std::sqrt;
  const Real scale = p.scale.has_value() ? Real(*p.scale) : Real(1) / sqrt(Real(dk));
  const double nan = std::numeric_limits<double>::quiet_NaN();

  Reference ref;
  ref.working_bits = bits;
  const std::size_t rows = std::size_t(s.batch) * s.heads * tq;
  ref.o.assign(rows * dv, nan);
  ref.o_residual.assign(rows * dv, 0.0);
  ref.lse_residual.assign(rows, 0.0);
  ref.spread.assign(rows * dv, 0.0);
  ref.spread_cond.assign(rows * dv, 0.0);
  ref.spread_logit.assign(rows * dv, 0.0);
  ref.max_abs_value.assign(rows * dv, 0.0);
  ref.value_min.assign(rows * dv, std::numeric_limits<double>::infinity());
  ref.value_max.assign(rows * dv, -std::numeric_limits<double>::infinity());
  ref.lse.assign(rows, nan);
  ref.empty.assign(rows, 0);
  ref.visible_keys.assign(rows, 0);
  ref.cond_max.assign(rows, 0.0);
  ref.mean_cond.assign(rows, 0.0);
  ref.logit_spread.assign(rows, 0.0);
  ref.logit_range.assign(rows, 0.0);
  if (options.weights) ref.weights.assign(rows * tk, 0.0);
  if (options.weights) ref.visible.assign(rows * tk, 0);

  const std::vector<int> query_rows = selected_query_rows(p, options);
  if (!options.query_rows.empty()) {
    ref.computed.assign(rows, 0);
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int i : query_rows) ref.computed[(std::size_t(b) * s.heads + h) * tq + i] = 1;
  }
  const int jobs = std::max(1, options.jobs);
  std::vector<RowScratch<Real>> scratch(jobs);
  std::vector<Rotated<Real>> keys(tk);

  for (int b = 0; b < s.batch; ++b) {
    for (int hk = 0; hk < s.kv_heads; ++hk) {
      // Keys are rotated once per kv head, and only if some row sees a key.
      bool any_row_sees = false;
      for (int h = hk * group; h < (hk + 1) * group && !any_row_sees; ++h)
        for (int i : query_rows) {
          visible_keys_of_row(p, b, i, scratch[0].allowed, h);
          if (std::find(scratch[0].allowed.begin(), scratch[0].allowed.end(), 1) != scratch[0].allowed.end()) {
            any_row_sees = true;
            break;
          }
        }
      if (any_row_sees) {
        const float* kbase = &p.k[(std::size_t(b) * s.kv_heads + hk) * tk * dk];
        for (int j = 0; j < tk; ++j) keys[j] = as_complex<Real>(kbase + std::size_t(j) * dk, dk, j, p.rope);
        key_dots.assign(keys);
      }
      // The group's rows, dealt round-robin to the jobs (each writes only its own rows).
      const std::size_t work = std::size_t(group) * query_rows.size();
      auto run = [&](int job) {
        for (std::size_t n = job; n < work; n += jobs) {
          const int h = hk * group + static_cast<int>(n / query_rows.size());
          compute_row(p, options, b, h, query_rows[n % query_rows.size()], scale, keys, key_dots, scratch[job], ref);
        }
      };
      if (jobs == 1 || work < 2) {
        run(0);
        continue;
      }
      // Job 0 runs here. A job whose thread cannot be started (a thread or process limit)
      // runs here too: fewer threads, the same rows, the same bits.
      std::vector<std::thread> threads;
      std::vector<int> inline_jobs = {0};
      std::exception_ptr failure;
      std::mutex failure_lock;
      auto guarded = [&](int job) {
        try {
          run(job);
        } catch (...) {
          std::lock_guard<std::mutex> hold(failure_lock);
          if (!failure) failure = std::current_exception();
        }
      };
      for (int job = 1; job < jobs; ++job) {
        try {
          threads.emplace_back([&guarded, &workers, job] {
            workers(guarded, job);
            release_thread_caches();
          });
        } catch (const std::system_error&) {
          inline_jobs.push_back(job);
        }
      }
      for (int job : inline_jobs) guarded(job);
      for (std::thread& t : threads) t.join();
      if (failure) std::rethrow_exception(failure);
    }
  }
  return ref;
}

}  // namespace attest::reference_detail
