// The exact gradient, templated on the scalar, with its bound (gradient.h). For each row, in the
// scalar type: the logits x_j = scale q.k_j (rotated pairs when RoPE is on), s_j = softcap(x_j) +
// alibi + bias, P from the exact row max and sum (the sink in it), dP_j = dO . v_j,
// D = sum_j P_j dP_j, dS_j = P_j (dP_j - D), dX_j = dS_j (1 - tanh^2(x_j / c)); then dQ, dK
// (rotated back) and dV, and dsink_h = -sum_i p_sink,i D_i. The bound's terms ride along in double.
#pragma once

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "attest/reference/gradient.h"
#include "reference_algorithm.h"

namespace attest::reference_detail {

inline double gamma_of(double n, double u) { return n * u < 1 ? n * u / (1 - n * u) : INFINITY; }

// Rotates a gradient given as complex pairs back by -angle (the transpose of the rotation) into x.
template <typename Real>
void rotate_back(const std::vector<Real>& re, const std::vector<Real>& im, int dim, long long pos, const Rope& rope,
                 Real* x) {
  for (std::size_t m = 0; m < re.size(); ++m) {
    Real a = re[m], b = im[m];
    if (rope.enabled) {
      using std::cos, std::pow, std::sin;
      const Real angle = Real(pos) * pow(Real(rope.base), Real(-2 * static_cast<int>(m)) / Real(dim));
      const Real c = cos(angle), s = sin(angle);
      const Real ra = a * c + b * s, rb = -a * s + b * c;
      a = ra, b = rb;
    }
    x[2 * m] = a;
    if (2 * static_cast<int>(m) + 1 < dim) x[2 * m + 1] = b;
  }
}

// |x_r| of a rotated vector, bounded without rotating: |a| + |b| of its pair (exact without RoPE).
inline double rotated_magnitude(const float* x, int dim, int r, bool rope) {
  if (!rope) return std::fabs(double(x[r]));
  const int m = r / 2 * 2;
  return std::fabs(double(x[m])) + (m + 1 < dim ? std::fabs(double(x[m + 1])) : 0.0);
}

// What every row of a problem shares: its sizes and the bound's constants.
template <typename Real>
struct GradientSetup {
  const Problem& p;
  const GradientNumerics& nm;
  int tq, tk, dk, dv, group;
  long long offset;
  double u, tiny;
  bool rope;
  Real scale;
  double scale_abs;
  double
      score_gamma;  // roundings of each logit: the dot product, the scale, the rotations (about 5 per pair each side)
};

// One query row: its visible keys, exact logits, P, dP, D and dX, and the error terms beside them.
template <typename Real>
struct GradientRow {
  explicit GradientRow(int tk)
      : x(tk),
        logit(tk),
        weight(tk),
        dp(tk),
        dx(tk),
        dx_err(tk),
        dx_abs(tk),
        dx_mag(tk),
        dx_tiny(tk),
        p_err(tk),
        p_cond(tk) {}
  std::size_t row = 0;
  std::vector<char> allowed;
  int count = 0;
  const float* qrow = nullptr;
  const float* d_o = nullptr;
  const float* o_given = nullptr;
  double lse_given = 0;
  Rotated<Real> query;
  std::vector<Real> x, logit, weight, dp, dx;
  std::vector<double> dx_err, dx_abs, dx_mag, dx_tiny, p_err, p_cond;
  std::vector<double> score_err, slope, slope_err;
  Real max_logit = 0, total = 0, d = 0;
  double lse_exact = 0, lse_err = 0, d_err = 0, d_given_abs = 0;
};

// Per key of one kv head: the rotated-space dK as pairs, dV, and the bound's sums.
template <typename Real>
struct KeyGradients {
  KeyGradients(int tk, std::size_t pairs, int dk, int dv)
      : dkeys(tk, Rotated<Real>{std::vector<Real>(pairs), std::vector<Real>(pairs)}),
        dvals(std::size_t(tk) * dv, Real(0)),
        dk_err(std::size_t(tk) * dk, 0.0),
        dk_abs(std::size_t(tk) * dk, 0.0),
        dk_mag(std::size_t(tk) * dk, 0.0),
        dv_err(std::size_t(tk) * dv, 0.0),
        dv_abs(std::size_t(tk) * dv, 0.0),
        terms(tk, 0.0),
        dv_mag(std::size_t(tk) * dv, 0.0) {}
  std::vector<Rotated<Real>> dkeys;
  std::vector<Real> dvals;
  std::vector<double> dk_err, dk_abs, dk_mag;
  std::vector<double> dv_err, dv_abs, terms, dv_mag;
};

// dsinks and its bound's sums, per query head.
template <typename Real>
struct SinkGradients {
  explicit SinkGradients(std::size_t heads)
      : dsinks(heads, Real(0)), sum(heads, 0.0), err(heads, 0.0), terms(heads, 0.0), mag(heads, 0.0) {}
  std::vector<Real> dsinks;
  std::vector<double> sum, err, terms, mag;
};

// Past a quarter of float's range a float kernel may overflow on the way: its gradients are unbounded.
inline void check_range(ReferenceGradient& g, double x) {
  if (!(std::fabs(x) < FLT_MAX / 4)) g.within_float_range = false;
}

// The row's logits, exactly; the kernel's logit error es_j (in double) beside them.
template <typename Real>
void row_logits(const GradientSetup<Real>& c, int b, int h, int i, const std::vector<Rotated<Real>>& keys,
                const float* kbase, GradientRow<Real>& w) {
  const Problem& p = c.p;
  const ScoreModifiers& md = p.modifiers;
  const int tk = c.tk, dk = c.dk;
  const double u = c.u;
  w.score_err.assign(tk, 0.0), w.slope.assign(tk, 1.0), w.slope_err.assign(tk, 0.0);
  w.max_logit = 0;
  bool have_max = false;
  for (int j = 0; j < tk; ++j) {
    if (!w.allowed[j]) continue;
    w.x[j] = dot(w.query, keys[j]) * c.scale;
    Real l = w.x[j];
    double cond = 0;
    const float* krow = kbase + std::size_t(j) * dk;
    for (int r = 0; r < dk; r += c.rope ? 2 : 1)
      cond += c.rope ? rotated_magnitude(w.qrow, dk, r, true) * rotated_magnitude(krow, dk, r, true)
                     : std::fabs(double(w.qrow[r]) * double(krow[r]));
    const double x_err = c.score_gamma * cond * c.scale_abs;
    double modifier_size = 0;
    if (md.softcap) {
      const Real cap(*md.softcap);
      const Real t = tanh_of(w.x[j] / cap);
      l = cap * t;
      const double td = static_cast<double>(t);
      w.slope[j] = 1 - td * td;
      // tanh in float: its own few ulps, and the argument's error through the slope.
      w.slope_err[j] = 2 * std::fabs(td) * (w.slope[j] * x_err / *md.softcap + 4 * u) + 2 * u;
      modifier_size += 4 * std::fabs(static_cast<double>(l));
    }
    if (!md.alibi_slopes.empty()) {
      const Real term = Real(md.alibi_slopes[h]) * Real(static_cast<double>(j - (c.offset + i)));
      l += term;
      modifier_size += 2 * std::fabs(static_cast<double>(term));
    }
    if (!md.bias.empty()) {
      l += Real(md.bias[md.bias_index(p.shape, b, h, i, j)]);
      modifier_size += 2 * std::fabs(double(md.bias[md.bias_index(p.shape, b, h, i, j)]));
    }
    w.logit[j] = l;
    w.score_err[j] = x_err + u * (modifier_size + 2 * std::fabs(static_cast<double>(l)));
    if (!have_max || l > w.max_logit) w.max_logit = l;
    have_max = true;
  }
}

// Each weight's error in log space: its score's, the given LSE's, the subtraction's, the exp's.
template <typename Real>
double log_weight_err(const GradientSetup<Real>& c, const GradientRow<Real>& w, int j) {
  return w.score_err[j] + w.lse_err + 2 * c.u * std::fabs(static_cast<double>(w.logit[j]) - w.lse_given) +
         c.nm.exp_error;
}

// P (the sink in its sum), dP_j = dO . v_j and D exactly; D's error as the kernel may form it.
template <typename Real>
void row_softmax_and_d(const GradientSetup<Real>& c, int h, const float* vbase, GradientRow<Real>& w,
                       ReferenceGradient& g) {
  const ScoreModifiers& md = c.p.modifiers;
  const int tk = c.tk, dv = c.dv;
  const double u = c.u, tiny = c.tiny;
  const bool has_sink = !md.sinks.empty();
  const Real sink = has_sink ? Real(md.sinks[h]) : Real(0);
  if (has_sink && sink > w.max_logit) w.max_logit = sink;
  using std::exp, std::log;
  w.total = has_sink ? exp(sink - w.max_logit) : Real(0);
  for (int j = 0; j < tk; ++j)
    if (w.allowed[j]) w.total += (w.weight[j] = exp(w.logit[j] - w.max_logit));
  w.lse_exact = static_cast<double>(w.max_logit + log(w.total));
  w.lse_err = std::fabs(w.lse_given - w.lse_exact);  // what the given LSE adds to every P
  // D exactly, and the kernel's D from the O it was given: sum dO (O_given), rounded.
  w.d = 0;
  const Real inverse_total = Real(1) / w.total;  // a product per key, not a division
  for (int j = 0; j < tk; ++j) {
    if (!w.allowed[j]) continue;
    w.weight[j] *= inverse_total;
    Real acc = 0;
    const float* vrow = vbase + std::size_t(j) * dv;
    for (int r = 0; r < dv; ++r)
      if (vrow[r] != 0.0f && w.d_o[r] != 0.0f) accumulate_product(acc, Real(w.d_o[r]), Real(vrow[r]));
    w.dp[j] = acc;
    w.d += w.weight[j] * w.dp[j];
  }
  w.d_err = 0, w.d_given_abs = 0;
  {
    Real o_exact = 0;  // sum_j P_j v_jr, per column, to charge O_given's own difference
    for (int r = 0; r < dv; ++r) {
      o_exact = 0;
      for (int j = 0; j < tk; ++j)
        if (w.allowed[j] && vbase[std::size_t(j) * dv + r] != 0.0f)
          accumulate_product(o_exact, w.weight[j], Real(vbase[std::size_t(j) * dv + r]));
      w.d_err += std::fabs(double(w.d_o[r])) * std::fabs(double(w.o_given[r]) - static_cast<double>(o_exact));
      w.d_given_abs += std::fabs(double(w.d_o[r]) * double(w.o_given[r]));
    }
    w.d_err += gamma_of(dv, u) * w.d_given_abs + tiny * dv;
  }
  // A textbook backward (llm.c, ggml, autograd) forms D = sum_j P_j dP_j from its own P instead:
  // its error is its own weights' (its forward's O error, seen through dO) and its sums'. D's
  // bound is the larger of that and the one above (D = dO . O_given, FlashAttention-2).
  {
    double own_err = 0, own_abs = 0;
    for (int j = 0; j < tk; ++j) {
      if (!w.allowed[j]) continue;
      const double pj = static_cast<double>(w.weight[j]), dpj = std::fabs(static_cast<double>(w.dp[j]));
      const double pe = std::exp(static_cast<double>(w.logit[j]) - w.lse_exact + log_weight_err(c, w, j)) - pj + tiny;
      double b_abs = 0;
      for (int r = 0; r < dv; ++r) b_abs += std::fabs(double(w.d_o[r]) * double(vbase[std::size_t(j) * dv + r]));
      const double dpe = gamma_of(dv, u) * b_abs + tiny * dv;
      own_err += pe * dpj + (pj + pe) * dpe;
      own_abs += (pj + pe) * (dpj + dpe);
    }
    w.d_err = std::max(w.d_err, own_err + gamma_of(w.count + 1, u) * own_abs + tiny * (w.count + 1));
  }
  check_range(g, w.lse_exact), check_range(g, static_cast<double>(w.d)), check_range(g, w.d_given_abs);
}

// dS and dX per key, with their errors.
template <typename Real>
void row_dx(const GradientSetup<Real>& c, const float* vbase, GradientRow<Real>& w, ReferenceGradient& g) {
  const ScoreModifiers& md = c.p.modifiers;
  const int tk = c.tk, dv = c.dv;
  const double u = c.u, tiny = c.tiny, dd = static_cast<double>(w.d);
  for (int j = 0; j < tk; ++j) {
    if (!w.allowed[j]) continue;
    const double pj = static_cast<double>(w.weight[j]);
    const double dpj = static_cast<double>(w.dp[j]);
    double b_abs = 0;
    const float* vrow = vbase + std::size_t(j) * dv;
    for (int r = 0; r < dv; ++r) b_abs += std::fabs(double(w.d_o[r]) * double(vrow[r]));
    const double dp_err = gamma_of(dv, u) * b_abs + tiny * dv;
    // P_j e^err - P_j in log space: a weight that underflows stays 0 (never 0 x inf).
    const double err = log_weight_err(c, w, j);
    // The weight's conditioning (its relative error in units of 8 u, at least 1): with
    // logits of 1e4 each P is off by ~1e4 u in any summation order, a lucky model too.
    w.p_cond[j] = std::max(1.0, err / (8 * u));
    w.p_err[j] = std::exp(static_cast<double>(w.logit[j]) - w.lse_exact + err) - pj + tiny;
    if (pj + w.p_err[j] >= FLT_MAX) w.p_err[j] = INFINITY;  // the kernel's weight may overflow to inf
    const double pj_hi = pj + w.p_err[j];
    const double ds_abs = std::fabs(pj * (dpj - dd));
    const double ds_err = (w.p_err[j]) * (std::fabs(dpj - dd)) + (pj_hi) * (dp_err + w.d_err) +
                          (gamma_of(3, u) * pj_hi) * (std::fabs(dpj) + std::fabs(dd) + dp_err + w.d_err) + tiny;
    w.dx[j] = w.weight[j] * (w.dp[j] - w.d) * Real(w.slope[j]);
    if (md.softcap) {  // the slope exactly, in the scalar type
      const Real t = tanh_of(w.x[j] / Real(*md.softcap));
      w.dx[j] = w.weight[j] * (w.dp[j] - w.d) * (Real(1) - t * t);
    }
    w.dx_abs[j] = std::fabs(static_cast<double>(w.dx[j]));
    w.dx_err[j] =
        (ds_err) * (w.slope[j] + w.slope_err[j]) + (ds_abs) * (w.slope_err[j]) + u * (w.dx_abs[j] + ds_err) + tiny;
    // The magnitudes dS's terms carry before dP = dO . v, D = dO . O and dP - D cancel: gate 2's scale.
    w.dx_mag[j] = pj_hi * w.p_cond[j] * (b_abs + w.d_given_abs + dp_err + w.d_err) * (w.slope[j] + w.slope_err[j]);
    // Any product of the chain may fall below float's normal range, in any order: its
    // quantum times every factor after it.
    w.dx_tiny[j] = tiny * (1 + std::fabs(dpj) + std::fabs(dd) + dp_err + w.d_err) * (1 + c.scale_abs) * 2;
    check_range(g, dpj), check_range(g, b_abs);
  }
}

// dQ of this row (rotated space, then back) with its bound; its share of its keys' dK and dV.
template <typename Real>
void row_gradients(const GradientSetup<Real>& c, int b, int hk, int i, const std::vector<Rotated<Real>>& keys,
                   const float* kbase, const GradientRow<Real>& w, KeyGradients<Real>& acc, ReferenceGradient& g) {
  const Shape& s = c.p.shape;
  const int tk = c.tk, dk = c.dk, dv = c.dv;
  const double scale_abs = c.scale_abs;
  Rotated<Real> dq{std::vector<Real>(w.query.re.size(), Real(0)), std::vector<Real>(w.query.re.size(), Real(0))};
  std::vector<double> dq_sum(dk, 0.0), dq_err(dk, 0.0), dq_mag(dk, 0.0);
  const double accumulate_gamma = gamma_of(w.count + 3 + (c.rope ? 12 : 0), c.u);
  for (int j = 0; j < tk; ++j) {
    if (!w.allowed[j]) continue;
    g.key_seen[(std::size_t(b) * s.kv_heads + hk) * tk + j] = 1;
    acc.terms[j] += 1;
    const Real sdx = c.scale * w.dx[j];
    for (std::size_t m = 0; m < w.query.re.size(); ++m) {
      accumulate_product(dq.re[m], sdx, keys[j].re[m]);
      accumulate_product(dq.im[m], sdx, keys[j].im[m]);
      accumulate_product(acc.dkeys[j].re[m], sdx, w.query.re[m]);
      accumulate_product(acc.dkeys[j].im[m], sdx, w.query.im[m]);
    }
    const float* krow = kbase + std::size_t(j) * dk;
    for (int r = 0; r < dk; ++r) {
      const double km = rotated_magnitude(krow, dk, r, c.rope), qm = rotated_magnitude(w.qrow, dk, r, c.rope);
      // The scaled dS may fall below float's normal range: its own absolute error, times the vector.
      dq_err[r] += (scale_abs * w.dx_err[j]) * (km) + w.dx_tiny[j] * (1 + km);
      dq_sum[r] += (scale_abs * (w.dx_abs[j] + w.dx_err[j])) * (km);
      dq_mag[r] += scale_abs * w.dx_mag[j] * km;
      acc.dk_err[std::size_t(j) * dk + r] += (scale_abs * w.dx_err[j]) * (qm) + w.dx_tiny[j] * (1 + qm);
      acc.dk_abs[std::size_t(j) * dk + r] += (scale_abs * (w.dx_abs[j] + w.dx_err[j])) * (qm);
      acc.dk_mag[std::size_t(j) * dk + r] += scale_abs * w.dx_mag[j] * qm;
    }
    for (int r = 0; r < dv; ++r) {  // dV_j += P_j dO
      const double d_o = std::fabs(double(w.d_o[r]));
      if (w.d_o[r] != 0.0f) accumulate_product(acc.dvals[std::size_t(j) * dv + r], w.weight[j], Real(w.d_o[r]));
      acc.dv_err[std::size_t(j) * dv + r] += (w.p_err[j]) * (d_o);
      acc.dv_abs[std::size_t(j) * dv + r] += (static_cast<double>(w.weight[j]) + w.p_err[j]) * (d_o);
      acc.dv_mag[std::size_t(j) * dv + r] += (static_cast<double>(w.weight[j]) + w.p_err[j]) * w.p_cond[j] * d_o;
    }
  }
  std::vector<Real> dq_row(dk);
  rotate_back(dq.re, dq.im, dk, c.offset + i, c.p.rope, dq_row.data());
  for (int r = 0; r < dk; ++r) {
    g.dq[w.row * dk + r] = static_cast<double>(dq_row[r]);
    g.dq_bound[w.row * dk + r] = dq_err[r] + (accumulate_gamma) * (dq_sum[r]) + c.tiny * (w.count + 2);
    g.dq_scale[w.row * dk + r] = dq_mag[r];
    check_range(g, dq_sum[r]);
  }
}

// The row's share of dsink_h = -sum_i p_sink,i D_i, with its bound's sums.
template <typename Real>
void row_sink(const GradientSetup<Real>& c, int h, const GradientRow<Real>& w, SinkGradients<Real>& sinks) {
  const ScoreModifiers& md = c.p.modifiers;
  if (md.sinks.empty()) return;
  using std::exp;
  const double u = c.u, tiny = c.tiny, dd = static_cast<double>(w.d);
  const Real ps = exp(Real(md.sinks[h]) - w.max_logit) / w.total;
  sinks.dsinks[h] -= ps * w.d;
  const double psd = static_cast<double>(ps);
  const double err = w.lse_err + 2 * u * std::fabs(double(md.sinks[h]) - w.lse_given) + c.nm.exp_error;
  const double ps_hi = std::exp(double(md.sinks[h]) - w.lse_exact + err);
  // p_sink may fall below float's normal range: its absolute error times D.
  sinks.err[h] += (ps_hi - psd + tiny) * (std::fabs(dd)) + (ps_hi) * (w.d_err) + tiny;
  sinks.sum[h] += (ps_hi) * (std::fabs(dd) + w.d_err);
  sinks.mag[h] += ps_hi * std::max(1.0, err / (8 * u)) * (std::fabs(dd) + w.d_err);
  sinks.terms[h] += 1;
}

// The keys of kv head hk of batch b: dK rotated back and dV, with their bounds.
template <typename Real>
void write_key_gradients(const GradientSetup<Real>& c, int b, int hk, const KeyGradients<Real>& acc,
                         ReferenceGradient& g) {
  const int tk = c.tk, dk = c.dk, dv = c.dv;
  const double u = c.u, tiny = c.tiny;
  for (int j = 0; j < tk; ++j) {
    const std::size_t kj = (std::size_t(b) * c.p.shape.kv_heads + hk) * tk + j;
    std::vector<Real> dk_row(dk);
    rotate_back(acc.dkeys[j].re, acc.dkeys[j].im, dk, j, c.p.rope, dk_row.data());
    const double terms = acc.terms[j];
    const double kgamma = gamma_of(terms + 3 + (c.rope ? 12 : 0), u), vgamma = gamma_of(terms + 2, u);
    for (int r = 0; r < dk; ++r) {
      const std::size_t e = std::size_t(j) * dk + r;
      g.dk[kj * dk + r] = static_cast<double>(dk_row[r]);
      g.dk_bound[kj * dk + r] = acc.dk_err[e] + (kgamma) * (acc.dk_abs[e]) + (terms > 0 ? tiny * (terms + 2) : 0.0);
      g.dk_scale[kj * dk + r] = acc.dk_mag[e];
      check_range(g, acc.dk_abs[e]);
    }
    for (int r = 0; r < dv; ++r) {
      const std::size_t e = std::size_t(j) * dv + r;
      g.dv[kj * dv + r] = static_cast<double>(acc.dvals[e]);
      g.dv_bound[kj * dv + r] = acc.dv_err[e] + (vgamma) * (acc.dv_abs[e]) + (terms > 0 ? tiny * (terms + 2) : 0.0);
      g.dv_scale[kj * dv + r] = acc.dv_mag[e];
      check_range(g, acc.dv_abs[e]);
    }
  }
}

// dsinks with their bounds; then every bound takes the exact value's rounding to double.
template <typename Real>
void finish_gradient(const GradientSetup<Real>& c, const SinkGradients<Real>& sinks, ReferenceGradient& g) {
  for (std::size_t h = 0; h < sinks.dsinks.size(); ++h) {
    g.dsinks[h] = static_cast<double>(sinks.dsinks[h]);
    g.dsinks_bound[h] =
        sinks.err[h] + (gamma_of(sinks.terms[h] + 2, c.u)) * (sinks.sum[h]) + c.tiny * (sinks.terms[h] + 2);
    g.dsinks_scale[h] = sinks.mag[h];
    check_range(g, sinks.sum[h]);
  }
  // The exact values were rounded to double: their own half ulp joins each bound. An infinite error
  // term times a zero (a weight that may overflow in float, times a zero dO column) leaves the
  // element unbounded too: the kernel's inf x 0 is NaN.
  for (auto [value, bound] :
       {std::pair{&g.dq, &g.dq_bound}, {&g.dk, &g.dk_bound}, {&g.dv, &g.dv_bound}, {&g.dsinks, &g.dsinks_bound}})
    for (std::size_t e = 0; e < value->size(); ++e) {
      (*bound)[e] += std::fabs((*value)[e]) * 0x1p-52;
      // Past float's range a float kernel may hold inf anywhere on the way: nothing is bounded.
      if (std::isnan((*bound)[e]) || (*bound)[e] >= FLT_MAX) (*bound)[e] = INFINITY;
    }
}

template <typename Real>
ReferenceGradient compute_gradient(const Problem& p, const GradientInputs& in, const GradientNumerics& nm, int bits) {
  p.validate();
  const Shape& s = p.shape;
  using std::sqrt;
  const double u = nm.roundoff;
  const bool rope = p.rope.enabled;
  const Real scale = p.scale ? Real(*p.scale) : Real(1) / sqrt(Real(s.head_dim));
  const GradientSetup<Real> c{p,
                              nm,
                              s.q_len,
                              s.k_len,
                              s.head_dim,
                              s.value_dim,
                              s.heads / s.kv_heads,
                              p.effective_q_offset(),
                              u,
                              0x1p-149,
                              rope,
                              scale,
                              std::fabs(static_cast<double>(scale)),
                              gamma_of(s.head_dim + 2 + (rope ? 12 : 0), u)};
  const int tq = c.tq, tk = c.tk, dk = c.dk, dv = c.dv;
  const std::size_t sink_count = p.modifiers.sinks.size();

  ReferenceGradient g;
  g.working_bits = bits;
  g.dq.assign(p.q_size(), 0.0), g.dk.assign(p.k_size(), 0.0), g.dv.assign(p.v_size(), 0.0);
  g.dq_bound.assign(p.q_size(), 0.0), g.dk_bound.assign(p.k_size(), 0.0), g.dv_bound.assign(p.v_size(), 0.0);
  g.dsinks.assign(sink_count, 0.0), g.dsinks_bound.assign(sink_count, 0.0);
  g.dq_scale.assign(p.q_size(), 0.0), g.dk_scale.assign(p.k_size(), 0.0), g.dv_scale.assign(p.v_size(), 0.0);
  g.dsinks_scale.assign(sink_count, 0.0);
  g.empty.assign(p.lse_size(), 0);
  g.key_seen.assign(std::size_t(s.batch) * s.kv_heads * tk, 0);
  SinkGradients<Real> sinks(sink_count);

  std::vector<Rotated<Real>> keys(tk);
  GradientRow<Real> w(tk);
  for (int b = 0; b < s.batch; ++b) {
    for (int hk = 0; hk < s.kv_heads; ++hk) {
      const float* kbase = &p.k[(std::size_t(b) * s.kv_heads + hk) * tk * dk];
      const float* vbase = &p.v[(std::size_t(b) * s.kv_heads + hk) * tk * dv];
      for (int j = 0; j < tk; ++j) keys[j] = as_complex<Real>(kbase + std::size_t(j) * dk, dk, j, p.rope);
      KeyGradients<Real> acc(tk, keys[0].re.size(), dk, dv);
      for (int h = hk * c.group; h < (hk + 1) * c.group; ++h) {
        for (int i = 0; i < tq; ++i) {
          w.row = (std::size_t(b) * s.heads + h) * tq + i;
          visible_keys_of_row(p, b, i, w.allowed, h);
          w.count = 0;
          for (char a : w.allowed) w.count += a;
          if (w.count == 0) {
            g.empty[w.row] = 1;
            continue;
          }
          w.qrow = &p.q[w.row * dk];
          w.query = as_complex<Real>(w.qrow, dk, c.offset + i, p.rope);
          w.d_o = &in.d_o[w.row * dv];
          w.o_given = &in.o[w.row * dv];
          w.lse_given = in.lse[w.row];
          row_logits(c, b, h, i, keys, kbase, w);
          row_softmax_and_d(c, h, vbase, w, g);
          row_dx(c, vbase, w, g);
          row_gradients(c, b, hk, i, keys, kbase, w, acc, g);
          row_sink(c, h, w, sinks);
        }
      }
      write_key_gradients(c, b, hk, acc, g);
    }
  }
  finish_gradient(c, sinks, g);
  return g;
}

}  // namespace attest::reference_detail
