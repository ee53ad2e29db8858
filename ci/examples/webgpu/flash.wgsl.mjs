// attest's FlashAttention-2 style forward in WGSL, f32. One workgroup computes BR query rows of one
// (batch, head): Q, then each BC-key tile of K and V, sit in workgroup memory; each row keeps a
// running max m, a running sum l and its O accumulator, rescaled by exp(m_old - m_new) whenever m
// grows (online softmax). Tiles no row of the workgroup can see (causal, window) are never loaded.
// Four threads share a row, each owning every fourth column of O. `edits` rewrites the source for
// the mutants (mutants.mjs).
export const BR = 16;
export const BC = 16;
export const D_MAX = 128;

const SOURCE = /* wgsl */ `
const BR: u32 = ${BR}u;
const BC: u32 = ${BC}u;
const D_MAX: u32 = ${D_MAX}u;
const THREADS: u32 = 64u;
const LANES: u32 = THREADS / BR;
const SLICE: u32 = D_MAX / LANES;
// Scores of hidden keys: a finite sentinel, since WGSL may assume no infinities in arithmetic.
const HIDDEN: f32 = -3.0e38;

struct Params {
  batch: u32, heads: u32, kv_heads: u32, q_len: u32,
  k_len: u32, dk: u32, dv: u32, q_offset: i32,
  causal: u32, window: u32, chunk: u32, lookahead: u32,
  kv_valid_at: i32, q_valid_at: i32, q_segment_at: i32, k_segment_at: i32,
  sinks_at: i32, slopes_at: i32, scale: f32, softcap: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> ints: array<i32>;    // kv_valid, q_valid, segments (at p.*_at)
@group(0) @binding(5) var<storage, read> floats: array<f32>;  // sinks, ALiBi slopes (at p.*_at)
@group(0) @binding(6) var<storage, read_write> out: array<f32>; // O [B][H][Tq][Dv], then LSE [B][H][Tq]

var<workgroup> q_tile: array<f32, BR * D_MAX>;
var<workgroup> k_tile: array<f32, BC * D_MAX>;
var<workgroup> v_tile: array<f32, BC * D_MAX>;
var<workgroup> s_tile: array<f32, BR * BC>;

fn floor_div(a: i32, b: i32) -> i32 {
  let d = a / b;
  return select(d, d - 1, (a % b != 0) && ((a < 0) != (b < 0)));
}

// attest's mask: query i of sequence b sits at q_offset + i, key j at j.
fn visible(b: u32, i: u32, j: u32) -> bool {
  let at = p.q_offset + i32(i);
  let key = i32(j);
  if (p.causal != 0u && key > at) { return false; }
  if (p.window != 0u && at - key >= i32(p.window)) { return false; }
  if (p.chunk != 0u && floor_div(at, i32(p.chunk)) != floor_div(key, i32(p.chunk))) { return false; }
  if (p.lookahead != 0u && key - at >= i32(p.lookahead)) { return false; }
  if (p.kv_valid_at >= 0 && key >= ints[u32(p.kv_valid_at) + b]) { return false; }
  if (p.q_valid_at >= 0 && i32(i) >= ints[u32(p.q_valid_at) + b]) { return false; }
  if (p.q_segment_at >= 0 &&
      ints[u32(p.q_segment_at) + b * p.q_len + i] != ints[u32(p.k_segment_at) + b * p.k_len + j]) { return false; }
  return true;
}

// e^x * 2^shift to about an ulp: WGSL's exp may lose |x| ulps, and may flush a subnormal result,
// where attest checks that weights down to e^-103 survive. x = k ln 2 + r with ln 2 in two parts
// (Cody and Waite), e^r by its Taylor polynomial on |r| <= ln2 / 2, then 2^(k + shift) exactly.
fn exp_shifted(x: f32, shift: i32) -> f32 {
  if (x < -250.0) { return 0.0; }
  let k = round(x * 1.4426950408889634);
  let r = (x - k * 0.693145751953125) - k * 1.4286068203094172e-6;
  let e = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r / 5040.0))))));
  return ldexp(e, i32(k) + shift);
}

// log(x) to about an ulp for a normal x > 0 (WGSL's log may be 2^-21 off near 1, where LSE
// often is): x = 2^k f with f in [sqrt(1/2), sqrt(2)), log f = 2 atanh(s), s = (f - 1) / (f + 1).
fn log_accurate(x: f32) -> f32 {
  let parts = frexp(x);
  var f = parts.fract;
  var k = f32(parts.exp);
  if (f < 0.7071067811865476) { f *= 2.0; k -= 1.0; }
  let s = (f - 1.0) / (f + 1.0);
  let s2 = s * s;
  let tail = s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0 + s2 / 13.0)))));
  return k * 0.693145751953125 + (2.0 * s + (2.0 * s * tail + k * 1.4286068203094172e-6));
}

// tanh without the overflow of exp(2x) for large |x| (SwiftShader's builtin returns NaN there),
// and by its series near 0, where (1 - e) / (1 + e) would cancel.
fn stable_tanh(x: f32) -> f32 {
  if (abs(x) < 0.125) {
    let x2 = x * x;
    return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))));
  }
  let e = exp_shifted(-2.0 * abs(x), 0);
  return sign(x) * (1.0 - e) / (1.0 + e);
}

// SwiftShader flushes subnormal results, and attest checks that weights down to e^-103 count: a
// weight below e^-80 goes, times 2^64, into a second accumulator; an output below 2^-100 is
// computed times 2^100, then unscaled by hand.
// y * 2^-100, rounded to the nearest subnormal by hand when it is one.
fn unscale(y: f32) -> f32 {
  if (abs(y) >= exp2(-26.0)) { return ldexp(y, -100); }
  let bits = u32(round(abs(y) * exp2(49.0))); // 2^(149 - 100): the subnormal's integer
  return bitcast<f32>(select(0u, 0x80000000u, y < 0.0) | bits);
}

// v * 2^64 exactly, a subnormal v included (from its bits: arithmetic may read it as 0).
fn times_2_to_64(v: f32) -> f32 {
  let bits = bitcast<u32>(v);
  if ((bits & 0x7f800000u) != 0u) { return ldexp(v, 64); }
  let magnitude = f32(bits & 0x007fffffu) * exp2(-85.0); // mantissa * 2^-149 * 2^64
  return select(magnitude, -magnitude, (bits & 0x80000000u) != 0u);
}

fn score(b: u32, h: u32, r: u32, c: u32, i: u32, j: u32) -> f32 {
  var dot = 0.0;
  for (var d = 0u; d < p.dk; d++) { dot += q_tile[r * D_MAX + d] * k_tile[c * D_MAX + d]; }
  var x = dot * p.scale;
  if (p.softcap > 0.0) { x = p.softcap * stable_tanh(x / p.softcap); }
  if (p.slopes_at >= 0) { x += floats[u32(p.slopes_at) + h] * f32(i32(j) - (p.q_offset + i32(i))); }
  return x;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let bh = group.y;
  let b = bh / p.heads;
  let h = bh % p.heads;
  let kv = b * p.kv_heads + h / (p.heads / p.kv_heads); // GQA: heads / kv_heads query heads per K/V head
  let row0 = group.x * BR;
  let r = t / LANES;
  let lane = t % LANES;
  let i = row0 + r;

  for (var e = t; e < BR * p.dk; e += THREADS) {
    let rr = e / p.dk;
    if (row0 + rr < p.q_len) { q_tile[rr * D_MAX + e % p.dk] = q[(bh * p.q_len + row0 + rr) * p.dk + e % p.dk]; }
  }

  // The key tiles any row of this workgroup can see: [tile_begin, tile_end).
  let last_row = min(row0 + BR, p.q_len) - 1u;
  var first_key = 0;
  var last_key = i32(p.k_len) - 1;
  if (p.causal != 0u) { last_key = min(last_key, p.q_offset + i32(last_row)); }
  if (p.window != 0u) { first_key = max(first_key, p.q_offset + i32(row0) - i32(p.window) + 1); }
  let key_tiles = (p.k_len + BC - 1u) / BC;
  var tile_begin = 0u;
  var tile_end = 0u;
  if (last_key >= first_key) {
    tile_begin = u32(first_key) / BC;
    tile_end = min(u32(last_key) / BC + 1u, key_tiles);
  }

  var m = HIDDEN; // the running max of this row's visible scores (the sink joins at the end)
  var l = 0.0;
  var acc: array<f32, SLICE>;
  var acc_tiny: array<f32, SLICE>; // weights below e^-80 (relative to m), times 2^64

  for (var tile = tile_begin; tile < tile_end; tile++) {
    let key0 = tile * BC;
    workgroupBarrier();
    for (var e = t; e < BC * D_MAX; e += THREADS) {
      let c = e / D_MAX;
      let d = e % D_MAX;
      let j = key0 + c;
      if (j < p.k_len && d < p.dk) { k_tile[e] = k[(kv * p.k_len + j) * p.dk + d]; }
      if (j < p.k_len && d < p.dv) { v_tile[e] = v[(kv * p.k_len + j) * p.dv + d]; }
    }
    workgroupBarrier();
    for (var e = t; e < BR * BC; e += THREADS) {
      let rr = e / BC;
      let c = e % BC;
      let j = key0 + c;
      var s = HIDDEN;
      if (row0 + rr < p.q_len && j < p.k_len && visible(b, row0 + rr, j)) { s = score(b, h, rr, c, row0 + rr, j); }
      s_tile[e] = s;
    }
    workgroupBarrier();
    var m_new = m;
    for (var c = 0u; c < BC; c++) {
      let s = s_tile[r * BC + c];
      if (s > HIDDEN) { m_new = max(m_new, s); }
    }
    if (m_new > HIDDEN) {
      let alpha = exp_shifted(m - m_new, 0);
      l *= alpha;
      let alpha_tiny = exp_shifted(m - m_new, 64);
      for (var n = 0u; n < SLICE; n++) {
        let rescaled = acc[n] * alpha;
        acc_tiny[n] *= alpha;
        if (abs(rescaled) >= 1.1754944e-38 || acc[n] == 0.0) { acc[n] = rescaled; }
        else { acc_tiny[n] += acc[n] * alpha_tiny; acc[n] = 0.0; } // would be flushed: into acc_tiny
      }
      for (var c = 0u; c < BC; c++) {
        let s = s_tile[r * BC + c];
        if (s > HIDDEN) {
          let x = s - m_new;
          let tiny = x < -80.0; // not in l: below 2^-115 of its largest weight, 1
          let w = exp_shifted(x, select(0, 64, tiny));
          if (!tiny) { l += w; }
          for (var n = 0u; n < SLICE; n++) {
            let d = lane + n * LANES;
            if (d >= p.dv) { break; }
            let value = v_tile[c * D_MAX + d];
            let wv = w * value;
            // A product below the normal range (a tiny or subnormal V) would be flushed: acc_tiny.
            if (tiny) { acc_tiny[n] += wv; }
            else if (abs(wv) >= 1.1754944e-38 || bitcast<u32>(value) << 1u == 0u) { acc[n] += wv; }
            else { acc_tiny[n] += w * times_2_to_64(value); }
          }
        }
      }
      m = m_new;
    }
  }

  if (i >= p.q_len) { return; }
  // An empty row's LSE is -inf: written as its bits, never computed (the OR with lane keeps the
  // bits a run-time value, which WGSL's constant evaluation would reject as unrepresentable).
  var lse = bitcast<f32>(0xff800000u | (lane & 0u));
  var mass = l;         // the softmax's denominator over e^m
  var far_sink = false; // a sink above the keys by more than e^40: O in the log domain
  var log_keep = 0.0;   // then log(O / (acc / l))
  if (l > 0.0) { lse = m + log_accurate(l); }
  if (p.sinks_at >= 0) {
    let sink = floats[u32(p.sinks_at) + h];
    let above = sink - m;
    if (l == 0.0) {
      lse = sink;
    } else if (above < 40.0) {
      mass = l + exp_shifted(above, 0);
      lse = m + log_accurate(mass);
    } else {
      far_sink = true;
      log_keep = (lse - sink);
      lse = sink + exp_shifted(log_keep, 0); // log1p(t) = t to f32 precision for t < e^-30
    }
  }
  let row = bh * p.q_len + i;
  for (var n = 0u; n < SLICE; n++) {
    let d = lane + n * LANES;
    if (d >= p.dv || l == 0.0) { continue; }
    var value: f32;
    if (far_sink) {
      value = (acc[n] + ldexp(acc_tiny[n], -64)) / l * exp_shifted(log_keep, 0);
      if (abs(value) < exp2(-100.0)) { // tiny or flushed: again times 2^100
        value = unscale(acc[n] / l * exp_shifted(log_keep, 100) + acc_tiny[n] / l * exp_shifted(log_keep, 36));
      }
    } else {
      value = (acc[n] + ldexp(acc_tiny[n], -64)) / mass;
      if (abs(value) < exp2(-100.0)) { value = unscale((ldexp(acc[n], 100) + ldexp(acc_tiny[n], 36)) / mass); }
    }
    out[row * p.dv + d] = value;
  }
  if (lane == 0u) { out[p.batch * p.heads * p.q_len * p.dv + row] = lse; }
}
`;

/** The kernel's WGSL, with each [from, to] of `edits` applied (every `from` must occur once). */
export function flashWgsl(edits = []) {
  let source = SOURCE;
  for (const [from, to] of edits) {
    if (source.split(from).length !== 2) throw new Error(`mutant edit ${JSON.stringify(from)} does not occur exactly once`);
    source = source.replace(from, to);
  }
  return source;
}
