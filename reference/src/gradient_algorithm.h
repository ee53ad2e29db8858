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

#include "attest/gradient.h"
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

template <typename Real>
ReferenceGradient compute_gradient(const Problem& p, const GradientInputs& in, const GradientNumerics& nm, int bits) {
  p.validate();
  const Shape& s = p.shape;
  const int tq = s.q_len, tk = s.k_len, dk = s.head_dim, dv = s.value_dim, group = s.heads / s.kv_heads;
  const long long offset = p.effective_q_offset();
  const double u = nm.roundoff, tiny = 0x1p-149;
  const ScoreModifiers& md = p.modifiers;
  const bool rope = p.rope.enabled;
  using std::sqrt;
  const Real scale = p.scale ? Real(*p.scale) : Real(1) / sqrt(Real(dk));
  const double scale_abs = std::fabs(static_cast<double>(scale));
  // Roundings of each logit: the dot product, the scale, the rotations (about 5 per pair each side).
  const double score_gamma = gamma_of(dk + 2 + (rope ? 12 : 0), u);

  ReferenceGradient g;
  g.working_bits = bits;
  g.dq.assign(p.q_size(), 0.0), g.dk.assign(p.k_size(), 0.0), g.dv.assign(p.v_size(), 0.0);
  g.dq_bound.assign(p.q_size(), 0.0), g.dk_bound.assign(p.k_size(), 0.0), g.dv_bound.assign(p.v_size(), 0.0);
  g.dsinks.assign(md.sinks.size(), 0.0), g.dsinks_bound.assign(md.sinks.size(), 0.0);
  g.dq_scale.assign(p.q_size(), 0.0), g.dk_scale.assign(p.k_size(), 0.0), g.dv_scale.assign(p.v_size(), 0.0);
  g.dsinks_scale.assign(md.sinks.size(), 0.0);
  g.empty.assign(p.lse_size(), 0);
  g.key_seen.assign(std::size_t(s.batch) * s.kv_heads * tk, 0);
  std::vector<Real> dsinks(md.sinks.size(), Real(0));
  std::vector<double> sink_sum(md.sinks.size(), 0.0), sink_err(md.sinks.size(), 0.0), sink_terms(md.sinks.size(), 0.0),
      sink_mag(md.sinks.size(), 0.0);
  const double range = FLT_MAX / 4;
  auto check_range = [&](double x) {
    if (!(std::fabs(x) < range)) g.within_float_range = false;
  };

  std::vector<Rotated<Real>> keys(tk);
  std::vector<char> allowed;
  std::vector<Real> x(tk), logit(tk), weight(tk), dp(tk), dx(tk);
  std::vector<double> dx_err(tk), dx_abs(tk), dx_mag(tk), dx_tiny(tk), p_err(tk), p_cond(tk);
  for (int b = 0; b < s.batch; ++b) {
    for (int hk = 0; hk < s.kv_heads; ++hk) {
      const float* kbase = &p.k[(std::size_t(b) * s.kv_heads + hk) * tk * dk];
      const float* vbase = &p.v[(std::size_t(b) * s.kv_heads + hk) * tk * dv];
      for (int j = 0; j < tk; ++j) keys[j] = as_complex<Real>(kbase + std::size_t(j) * dk, dk, j, p.rope);
      // Per key of this kv head: the rotated-space dK as pairs, dV, and the bound's sums.
      std::vector<Rotated<Real>> dkeys(tk, Rotated<Real>{std::vector<Real>(keys[0].re.size()), std::vector<Real>(keys[0].re.size())});
      std::vector<Real> dvals(std::size_t(tk) * dv, Real(0));
      std::vector<double> dk_err(std::size_t(tk) * dk, 0.0), dk_abs(std::size_t(tk) * dk, 0.0),
          dk_mag(std::size_t(tk) * dk, 0.0);
      std::vector<double> dv_err(std::size_t(tk) * dv, 0.0), dv_abs(std::size_t(tk) * dv, 0.0), terms(tk, 0.0),
          dv_mag(std::size_t(tk) * dv, 0.0);
      for (int h = hk * group; h < (hk + 1) * group; ++h) {
        for (int i = 0; i < tq; ++i) {
          const std::size_t row = (std::size_t(b) * s.heads + h) * tq + i;
          visible_keys_of_row(p, b, i, allowed, h);
          int count = 0;
          for (char a : allowed) count += a;
          if (count == 0) {
            g.empty[row] = 1;
            continue;
          }
          const float* qrow = &p.q[row * dk];
          const Rotated<Real> query = as_complex<Real>(qrow, dk, offset + i, p.rope);
          const float* d_o = &in.d_o[row * dv];
          const float* o_given = &in.o[row * dv];
          const double lse_given = in.lse[row];
          // Logits, exactly; the kernel's logit error es_j (in double) beside them.
          std::vector<double> score_err(tk, 0.0), slope(tk, 1.0), slope_err(tk, 0.0);
          Real max_logit = 0;
          bool have_max = false;
          for (int j = 0; j < tk; ++j) {
            if (!allowed[j]) continue;
            Real acc = 0;
            for (std::size_t m = 0; m < query.re.size(); ++m) {
              accumulate_product(acc, query.re[m], keys[j].re[m]);
              accumulate_product(acc, query.im[m], keys[j].im[m]);
            }
            x[j] = acc * scale;
            Real l = x[j];
            double cond = 0;
            const float* krow = kbase + std::size_t(j) * dk;
            for (int r = 0; r < dk; r += rope ? 2 : 1)
              cond += rope ? rotated_magnitude(qrow, dk, r, true) * rotated_magnitude(krow, dk, r, true)
                           : std::fabs(double(qrow[r]) * double(krow[r]));
            const double x_err = score_gamma * cond * scale_abs;
            double modifier_size = 0;
            if (md.softcap) {
              const Real c(*md.softcap);
              const Real t = tanh_of(x[j] / c);
              l = c * t;
              const double td = static_cast<double>(t);
              slope[j] = 1 - td * td;
              // tanh in float: its own few ulps, and the argument's error through the slope.
              slope_err[j] = 2 * std::fabs(td) * (slope[j] * x_err / *md.softcap + 4 * u) + 2 * u;
              modifier_size += 4 * std::fabs(static_cast<double>(l));
            }
            if (!md.alibi_slopes.empty()) {
              const Real term = Real(md.alibi_slopes[h]) * Real(static_cast<double>(j - (offset + i)));
              l += term;
              modifier_size += 2 * std::fabs(static_cast<double>(term));
            }
            if (!md.bias.empty()) {
              l += Real(md.bias[md.bias_index(s, b, h, i, j)]);
              modifier_size += 2 * std::fabs(double(md.bias[md.bias_index(s, b, h, i, j)]));
            }
            logit[j] = l;
            score_err[j] = x_err + u * (modifier_size + 2 * std::fabs(static_cast<double>(l)));
            if (!have_max || l > max_logit) max_logit = l;
            have_max = true;
          }
          const bool has_sink = !md.sinks.empty();
          const Real sink = has_sink ? Real(md.sinks[h]) : Real(0);
          if (has_sink && sink > max_logit) max_logit = sink;
          using std::exp, std::log;
          Real total = has_sink ? exp(sink - max_logit) : Real(0);
          for (int j = 0; j < tk; ++j)
            if (allowed[j]) total += (weight[j] = exp(logit[j] - max_logit));
          const double lse_exact = static_cast<double>(max_logit + log(total));
          const double lse_err = std::fabs(lse_given - lse_exact);  // what the given LSE adds to every P
          // D exactly, and the kernel's D from the O it was given: sum dO (O_given), rounded.
          Real d = 0;
          for (int j = 0; j < tk; ++j) {
            if (!allowed[j]) continue;
            weight[j] /= total;
            Real acc = 0;
            const float* vrow = vbase + std::size_t(j) * dv;
            for (int r = 0; r < dv; ++r)
              if (vrow[r] != 0.0f && d_o[r] != 0.0f) accumulate_product(acc, Real(d_o[r]), Real(vrow[r]));
            dp[j] = acc;
            d += weight[j] * dp[j];
          }
          double d_err = 0, d_given_abs = 0;
          {
            Real o_exact = 0;  // sum_j P_j v_jr, per column, to charge O_given's own difference
            for (int r = 0; r < dv; ++r) {
              o_exact = 0;
              for (int j = 0; j < tk; ++j)
                if (allowed[j] && vbase[std::size_t(j) * dv + r] != 0.0f)
                  accumulate_product(o_exact, weight[j], Real(vbase[std::size_t(j) * dv + r]));
              d_err += std::fabs(double(d_o[r])) * std::fabs(double(o_given[r]) - static_cast<double>(o_exact));
              d_given_abs += std::fabs(double(d_o[r]) * double(o_given[r]));
            }
            d_err += gamma_of(dv, u) * d_given_abs + tiny * dv;
          }
          // Each weight's error in log space: its score's, the given LSE's, the subtraction's, the exp's.
          auto log_weight_err = [&](int j) {
            return score_err[j] + lse_err + 2 * u * std::fabs(static_cast<double>(logit[j]) - lse_given) + nm.exp_error;
          };
          // A textbook backward (llm.c, ggml, autograd) forms D = sum_j P_j dP_j from its own P instead:
          // its error is its own weights' (its forward's O error, seen through dO) and its sums'. D's
          // bound is the larger of that and the one above (D = dO . O_given, FlashAttention-2).
          {
            double own_err = 0, own_abs = 0;
            for (int j = 0; j < tk; ++j) {
              if (!allowed[j]) continue;
              const double pj = static_cast<double>(weight[j]), dpj = std::fabs(static_cast<double>(dp[j]));
              const double pe = std::exp(static_cast<double>(logit[j]) - lse_exact + log_weight_err(j)) - pj + tiny;
              double b_abs = 0;
              for (int r = 0; r < dv; ++r) b_abs += std::fabs(double(d_o[r]) * double(vbase[std::size_t(j) * dv + r]));
              const double dpe = gamma_of(dv, u) * b_abs + tiny * dv;
              own_err += pe * dpj + (pj + pe) * dpe;
              own_abs += (pj + pe) * (dpj + dpe);
            }
            d_err = std::max(d_err, own_err + gamma_of(count + 1, u) * own_abs + tiny * (count + 1));
          }
          const double dd = static_cast<double>(d);
          check_range(lse_exact), check_range(dd), check_range(d_given_abs);
          // dS and dX per key, with their errors.
          for (int j = 0; j < tk; ++j) {
            if (!allowed[j]) continue;
            const double pj = static_cast<double>(weight[j]);
            const double dpj = static_cast<double>(dp[j]);
            double b_abs = 0;
            const float* vrow = vbase + std::size_t(j) * dv;
            for (int r = 0; r < dv; ++r) b_abs += std::fabs(double(d_o[r]) * double(vrow[r]));
            const double dp_err = gamma_of(dv, u) * b_abs + tiny * dv;
            // P_j e^err - P_j in log space: a weight that underflows stays 0 (never 0 x inf).
            const double err = log_weight_err(j);
            // The weight's conditioning (its relative error in units of 8 u, at least 1): with
            // logits of 1e4 each P is off by ~1e4 u in any summation order, a lucky model too.
            p_cond[j] = std::max(1.0, err / (8 * u));
            p_err[j] = std::exp(static_cast<double>(logit[j]) - lse_exact + err) - pj + tiny;
            if (pj + p_err[j] >= FLT_MAX) p_err[j] = INFINITY;  // the kernel's weight may overflow to inf
            const double pj_hi = pj + p_err[j];
            const double ds_abs = std::fabs(pj * (dpj - dd));
            const double ds_err = (p_err[j]) * (std::fabs(dpj - dd)) + (pj_hi) * (dp_err + d_err) +
                                  (gamma_of(3, u) * pj_hi) * (std::fabs(dpj) + std::fabs(dd) + dp_err + d_err) + tiny;
            dx[j] = weight[j] * (dp[j] - d) * Real(slope[j]);
            if (md.softcap) {  // the slope exactly, in the scalar type
              const Real t = tanh_of(x[j] / Real(*md.softcap));
              dx[j] = weight[j] * (dp[j] - d) * (Real(1) - t * t);
            }
            dx_abs[j] = std::fabs(static_cast<double>(dx[j]));
            dx_err[j] = (ds_err) * (slope[j] + slope_err[j]) + (ds_abs) * (slope_err[j]) + u * (dx_abs[j] + ds_err) + tiny;
            // The magnitudes dS's terms carry before dP = dO . v, D = dO . O and dP - D cancel: gate 2's scale.
            dx_mag[j] = pj_hi * p_cond[j] * (b_abs + d_given_abs + dp_err + d_err) * (slope[j] + slope_err[j]);
            // Any product of the chain may fall below float's normal range, in any order: its
            // quantum times every factor after it.
            dx_tiny[j] = tiny * (1 + std::fabs(dpj) + std::fabs(dd) + dp_err + d_err) * (1 + scale_abs) * 2;
            check_range(dpj), check_range(b_abs);
          }
          // dQ of this row (rotated space, then back), dK and dV of its keys, with their bounds.
          Rotated<Real> dq{std::vector<Real>(query.re.size(), Real(0)), std::vector<Real>(query.re.size(), Real(0))};
          std::vector<double> dq_sum(dk, 0.0), dq_err(dk, 0.0), dq_mag(dk, 0.0);
          const double accumulate_gamma = gamma_of(count + 3 + (rope ? 12 : 0), u);
          for (int j = 0; j < tk; ++j) {
            if (!allowed[j]) continue;
            g.key_seen[(std::size_t(b) * s.kv_heads + hk) * tk + j] = 1;
            terms[j] += 1;
            const Real sdx = scale * dx[j];
            for (std::size_t m = 0; m < query.re.size(); ++m) {
              accumulate_product(dq.re[m], sdx, keys[j].re[m]);
              accumulate_product(dq.im[m], sdx, keys[j].im[m]);
              accumulate_product(dkeys[j].re[m], sdx, query.re[m]);
              accumulate_product(dkeys[j].im[m], sdx, query.im[m]);
            }
            const float* krow = kbase + std::size_t(j) * dk;
            for (int r = 0; r < dk; ++r) {
              const double km = rotated_magnitude(krow, dk, r, rope), qm = rotated_magnitude(qrow, dk, r, rope);
              // The scaled dS may fall below float's normal range: its own absolute error, times the vector.
              dq_err[r] += (scale_abs * dx_err[j]) * (km) + dx_tiny[j] * (1 + km);
              dq_sum[r] += (scale_abs * (dx_abs[j] + dx_err[j])) * (km);
              dq_mag[r] += scale_abs * dx_mag[j] * km;
              dk_err[std::size_t(j) * dk + r] += (scale_abs * dx_err[j]) * (qm) + dx_tiny[j] * (1 + qm);
              dk_abs[std::size_t(j) * dk + r] += (scale_abs * (dx_abs[j] + dx_err[j])) * (qm);
              dk_mag[std::size_t(j) * dk + r] += scale_abs * dx_mag[j] * qm;
            }
            for (int r = 0; r < dv; ++r) {  // dV_j += P_j dO
              if (d_o[r] != 0.0f) accumulate_product(dvals[std::size_t(j) * dv + r], weight[j], Real(d_o[r]));
              dv_err[std::size_t(j) * dv + r] += (p_err[j]) * (std::fabs(double(d_o[r])));
              dv_abs[std::size_t(j) * dv + r] += (static_cast<double>(weight[j]) + p_err[j]) * (std::fabs(double(d_o[r])));
              dv_mag[std::size_t(j) * dv + r] += (static_cast<double>(weight[j]) + p_err[j]) * p_cond[j] * std::fabs(double(d_o[r]));
            }
          }
          std::vector<Real> dq_row(dk);
          rotate_back(dq.re, dq.im, dk, offset + i, p.rope, dq_row.data());
          for (int r = 0; r < dk; ++r) {
            g.dq[row * dk + r] = static_cast<double>(dq_row[r]);
            g.dq_bound[row * dk + r] = dq_err[r] + (accumulate_gamma) * (dq_sum[r]) + tiny * (count + 2);
            g.dq_scale[row * dk + r] = dq_mag[r];
            check_range(dq_sum[r]);
          }
          if (has_sink) {
            const Real ps = exp(sink - max_logit) / total;
            dsinks[h] -= ps * d;
            const double psd = static_cast<double>(ps);
            const double err = lse_err + 2 * u * std::fabs(double(md.sinks[h]) - lse_given) + nm.exp_error;
            const double ps_hi = std::exp(double(md.sinks[h]) - lse_exact + err);
            // p_sink may fall below float's normal range: its absolute error times D.
            sink_err[h] += (ps_hi - psd + tiny) * (std::fabs(dd)) + (ps_hi) * (d_err) + tiny;
            sink_sum[h] += (ps_hi) * (std::fabs(dd) + d_err);
            sink_mag[h] += ps_hi * std::max(1.0, err / (8 * u)) * (std::fabs(dd) + d_err);
            sink_terms[h] += 1;
          }
        }
      }
      for (int j = 0; j < tk; ++j) {
        const std::size_t kj = (std::size_t(b) * s.kv_heads + hk) * tk + j;
        std::vector<Real> dk_row(dk);
        rotate_back(dkeys[j].re, dkeys[j].im, dk, j, p.rope, dk_row.data());
        const double kgamma = gamma_of(terms[j] + 3 + (rope ? 12 : 0), u), vgamma = gamma_of(terms[j] + 2, u);
        for (int r = 0; r < dk; ++r) {
          g.dk[kj * dk + r] = static_cast<double>(dk_row[r]);
          g.dk_bound[kj * dk + r] = dk_err[std::size_t(j) * dk + r] + (kgamma) * (dk_abs[std::size_t(j) * dk + r]) +
                                    (terms[j] > 0 ? tiny * (terms[j] + 2) : 0.0);
          g.dk_scale[kj * dk + r] = dk_mag[std::size_t(j) * dk + r];
          check_range(dk_abs[std::size_t(j) * dk + r]);
        }
        for (int r = 0; r < dv; ++r) {
          g.dv[kj * dv + r] = static_cast<double>(dvals[std::size_t(j) * dv + r]);
          g.dv_bound[kj * dv + r] = dv_err[std::size_t(j) * dv + r] + (vgamma) * (dv_abs[std::size_t(j) * dv + r]) +
                                    (terms[j] > 0 ? tiny * (terms[j] + 2) : 0.0);
          g.dv_scale[kj * dv + r] = dv_mag[std::size_t(j) * dv + r];
          check_range(dv_abs[std::size_t(j) * dv + r]);
        }
      }
    }
  }
  for (std::size_t h = 0; h < dsinks.size(); ++h) {
    g.dsinks[h] = static_cast<double>(dsinks[h]);
    g.dsinks_bound[h] = sink_err[h] + (gamma_of(sink_terms[h] + 2, u)) * (sink_sum[h]) + tiny * (sink_terms[h] + 2);
    g.dsinks_scale[h] = sink_mag[h];
    check_range(sink_sum[h]);
  }
  // The exact values were rounded to double: their own half ulp joins each bound. An infinite error
  // term times a zero (a weight that may overflow in float, times a zero dO column) leaves the
  // element unbounded too: the kernel's inf x 0 is NaN.
  for (auto [value, bound] : {std::pair{&g.dq, &g.dq_bound}, {&g.dk, &g.dk_bound}, {&g.dv, &g.dv_bound},
                              {&g.dsinks, &g.dsinks_bound}})
    for (std::size_t e = 0; e < value->size(); ++e) {
      (*bound)[e] += std::fabs((*value)[e]) * 0x1p-52;
      // Past float's range a float kernel may hold inf anywhere on the way: nothing is bounded.
      if (std::isnan((*bound)[e]) || (*bound)[e] >= FLT_MAX) (*bound)[e] = INFINITY;
    }
  return g;
}

}  // namespace attest::reference_detail
