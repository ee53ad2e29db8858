// Double-double arithmetic: a value is hi + lo with |lo| <= ulp(hi)/2, about 106 significant
// bits, from error-free transformations (TwoSum, and TwoProd via fma). The fast reference
// instantiates the reference algorithm with it; MPFR cross-checks it in tests.
// Algorithms after Hida, Li and Bailey's QD library; exp by argument reduction, a table and Taylor.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace attest::reference_detail {

class DoubleDouble {
 public:
  constexpr DoubleDouble() = default;
  constexpr DoubleDouble(double x) : hi_(x) {}  // NOLINT: implicit like a built-in float type
  constexpr DoubleDouble(float x) : hi_(x) {}   // NOLINT
  constexpr DoubleDouble(int x) : hi_(x) {}     // NOLINT
  constexpr DoubleDouble(long long x)
      : hi_(static_cast<double>(x)),
        lo_(static_cast<double>(x - static_cast<long long>(static_cast<double>(x)))) {}  // NOLINT
  static DoubleDouble from_parts(double hi, double lo) {
    DoubleDouble d;
    d.hi_ = hi;
    d.lo_ = lo;
    return d;
  }
  explicit operator double() const { return hi_ + lo_; }
  double hi() const { return hi_; }
  double lo() const { return lo_; }

  friend DoubleDouble operator+(DoubleDouble a, DoubleDouble b) {
    // Accurate addition: both the high and the low parts' rounding errors are kept.
    double s, e, t, f;
    two_sum(a.hi_, b.hi_, s, e);
    two_sum(a.lo_, b.lo_, t, f);
    e += t;
    quick_two_sum(s, e, s, e);
    e += f;
    quick_two_sum(s, e, s, e);
    return from_parts(s, e);
  }
  friend DoubleDouble operator-(DoubleDouble a) { return from_parts(-a.hi_, -a.lo_); }
  friend DoubleDouble operator-(DoubleDouble a, DoubleDouble b) { return a + (-b); }
  friend DoubleDouble operator*(DoubleDouble a, DoubleDouble b) {
    const double p = a.hi_ * b.hi_;
    double e = std::fma(a.hi_, b.hi_, -p);
    e += a.hi_ * b.lo_ + a.lo_ * b.hi_;
    double s;
    quick_two_sum(p, e, s, e);
    return from_parts(s, e);
  }
  friend DoubleDouble operator/(DoubleDouble a, DoubleDouble b) {
    // Long division: three quotient digits.
    const double q1 = a.hi_ / b.hi_;
    DoubleDouble r = a - b * DoubleDouble(q1);
    const double q2 = r.hi_ / b.hi_;
    r = r - b * DoubleDouble(q2);
    const double q3 = r.hi_ / b.hi_;
    double s, e;
    quick_two_sum(q1, q2, s, e);
    return DoubleDouble::from_parts(s, e) + DoubleDouble(q3);
  }
  DoubleDouble& operator+=(DoubleDouble b) { return *this = *this + b; }
  DoubleDouble& operator-=(DoubleDouble b) { return *this = *this - b; }
  DoubleDouble& operator*=(DoubleDouble b) { return *this = *this * b; }
  DoubleDouble& operator/=(DoubleDouble b) { return *this = *this / b; }

  // acc += a * b with one renormalization (the reference's dot products and weighted sums).
  friend void accumulate_product(DoubleDouble& acc, DoubleDouble a, DoubleDouble b) {
    const double p = a.hi_ * b.hi_;
    const double e = std::fma(a.hi_, b.hi_, -p) + (a.hi_ * b.lo_ + a.lo_ * b.hi_);
    double s, t;
    two_sum(acc.hi_, p, s, t);
    t += acc.lo_ + e;
    quick_two_sum(s, t, acc.hi_, acc.lo_);
  }

  // accumulate_product of two float values: their product is exact in double (48 bits), so its
  // error terms are zero and the sum is the same without them.
  friend void accumulate_float_product(DoubleDouble& acc, DoubleDouble a, DoubleDouble b) {
    const double p = a.hi_ * b.hi_;
    double s, t;
    two_sum(acc.hi_, p, s, t);
    t += acc.lo_;
    quick_two_sum(s, t, acc.hi_, acc.lo_);
  }

  // acc[r] += w * v[r] for a float row v: accumulate_product without the terms of v's zero low
  // part. A zero value adds nothing (probes like V = I are mostly 0; a NaN weight stays out).
  friend void accumulate_weighted(DoubleDouble* acc, DoubleDouble w, const float* v, int n) {
    for (int r = 0; r < n; ++r) {
      if (v[r] == 0.0f) continue;
      const double b = v[r];
      const double p = w.hi_ * b;
      const double e = std::fma(w.hi_, b, -p) + w.lo_ * b;
      double s, t;
      two_sum(acc[r].hi_, p, s, t);
      t += acc[r].lo_ + e;
      quick_two_sum(s, t, acc[r].hi_, acc[r].lo_);
    }
  }

  friend bool operator<(DoubleDouble a, DoubleDouble b) { return a.hi_ < b.hi_ || (a.hi_ == b.hi_ && a.lo_ < b.lo_); }
  friend bool operator>(DoubleDouble a, DoubleDouble b) { return b < a; }
  friend bool operator<=(DoubleDouble a, DoubleDouble b) { return !(b < a); }
  friend bool operator>=(DoubleDouble a, DoubleDouble b) { return !(a < b); }
  friend bool operator==(DoubleDouble a, DoubleDouble b) { return a.hi_ == b.hi_ && a.lo_ == b.lo_; }

  friend DoubleDouble abs(DoubleDouble a) { return a.hi_ < 0 ? -a : a; }
  friend DoubleDouble ldexp(DoubleDouble a, int e) { return from_parts(std::ldexp(a.hi_, e), std::ldexp(a.lo_, e)); }

  friend DoubleDouble sqrt(DoubleDouble a) {
    if (!(a.hi_ > 0)) return DoubleDouble(std::sqrt(a.hi_));
    const double y = std::sqrt(a.hi_);  // one Newton step doubles the bits
    return DoubleDouble(y) + (a - DoubleDouble(y) * DoubleDouble(y)) / DoubleDouble(2 * y);
  }

  friend DoubleDouble exp(DoubleDouble a) {
    if (std::isnan(a.hi_)) return a;
    if (a.hi_ > 709.0) return DoubleDouble(std::numeric_limits<double>::infinity());
    if (a.hi_ < -708.0) return DoubleDouble(0.0);  // below 2^-1021: invisible next to any weight >= 1
    static const DoubleDouble ln2 = from_parts(6.931471805599452862e-01, 2.319046813846299558e-17);
    // a = k ln2 + j/64 + t with |t| <= 1/128: e^a = 2^k e^(j/64) e^t, e^t by 12 Taylor terms
    // (t^13/13! < 2^-110), e^(j/64) from a table.
    const double k = std::nearbyint(a.hi_ / ln2.hi_);
    const DoubleDouble r = a - ln2 * DoubleDouble(k);
    const double j = std::nearbyint(r.hi_ * 64.0);
    const DoubleDouble t = r - DoubleDouble(j / 64.0);
    const DoubleDouble e = exp_small(t) * exp_of_64ths()[static_cast<int>(j) + kTableHalf];
    const double scale = std::bit_cast<double>(static_cast<std::uint64_t>(static_cast<int>(k) + 1022) << 52);
    return from_parts(e.hi_ * scale * 2.0, e.lo_ * scale * 2.0);  // 2^k in two exact steps
  }

  friend DoubleDouble log(DoubleDouble a) {
    if (!(a.hi_ > 0)) return DoubleDouble(std::log(a.hi_));
    const DoubleDouble y(std::log(a.hi_));  // Newton: y + a e^-y - 1
    return y + a * exp(-y) - DoubleDouble(1.0);
  }

 private:
  static constexpr int kTableHalf = 24;  // |j| <= 23 after the ln2 reduction

  // 1/i! for i <= 30, exact to a few units of 2^-106.
  static const std::array<DoubleDouble, 31>& inverse_factorials() {
    static const auto table = [] {
      std::array<DoubleDouble, 31> f{};
      f[0] = DoubleDouble(1.0);
      for (int i = 1; i < 31; ++i) f[i] = f[i - 1] / DoubleDouble(i);
      return f;
    }();
    return table;
  }

  // sum_{i <= terms} x^i / i! by Horner.
  static DoubleDouble exp_taylor(DoubleDouble x, int terms) {
    const auto& f = inverse_factorials();
    DoubleDouble p = f[terms];
    for (int i = terms - 1; i >= 0; --i) p = p * x + f[i];
    return p;
  }

  // e^t for |t| <= 1/128 by 12 terms; those of order >= 7 are below 2^-50 of the sum, so plain
  // double holds them to 2^-110 and only the first seven need double-double products.
  static DoubleDouble exp_small(DoubleDouble t) {
    const auto& f = inverse_factorials();
    double tail = f[12].hi_;
    for (int i = 11; i >= 7; --i) tail = tail * t.hi_ + f[i].hi_;
    DoubleDouble p(tail);
    for (int i = 6; i >= 0; --i) p = p * t + f[i];
    return p;
  }

  // e^(j/64) for |j| < kTableHalf, by 30 Taylor terms (|j/64| < 0.37: the next term < 2^-140).
  static const std::array<DoubleDouble, 2 * kTableHalf + 1>& exp_of_64ths() {
    static const auto table = [] {
      std::array<DoubleDouble, 2 * kTableHalf + 1> e{};
      for (int j = -kTableHalf; j <= kTableHalf; ++j) e[j + kTableHalf] = exp_taylor(DoubleDouble(j / 64.0), 30);
      return e;
    }();
    return table;
  }

  static void two_sum(double a, double b, double& s, double& e) {
    s = a + b;
    const double bb = s - a;
    e = (a - (s - bb)) + (b - bb);
  }
  static void quick_two_sum(double a, double b, double& s, double& e) {
    s = a + b;
    e = b - (s - a);
  }

  double hi_ = 0.0;
  double lo_ = 0.0;
};

// RoPE needs these on the double-double type; they run through MPFR (reference.cpp).
DoubleDouble cos(DoubleDouble a);
DoubleDouble sin(DoubleDouble a);
DoubleDouble pow(DoubleDouble a, DoubleDouble b);

}  // namespace attest::reference_detail
