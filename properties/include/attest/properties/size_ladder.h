// Problems at the sizes where kernels switch code: around 1, 2 and 3 times each declared tile,
// the page size, and powers of two up to a maximum length (docs/design.md#kernels-and-paths: a kernel may serve
// shapes with different paths). Short ones are checked on every row; long ones (the `long`
// stage) on a sample of rows, since each row costs Tk exact dot products.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/properties/oracle.h"
#include "attest/properties/verdict.h"

namespace attest {

struct SizeOptions {
  int max_len = 32768;         // the ladder of powers of two ends here
  std::vector<int> lengths;    // when set, these lengths instead of the ladder
  std::vector<int> head_dims;  // widths of every case (default 64, fitted to the contract)
  int full_rows_limit = 512;   // longer problems are checked on a sample of rows
  int square_limit = 8192;     // the longest Tq = Tk problem without a window (its cost grows as T^2)
  int sampled_rows = 64;       // rows checked per long problem
  int jobs = 1;                // threads for the reference
  double time_budget = 0;      // seconds the long stage may spend (0: no limit but the lengths)
  int required_len = 0;        // keys the long stage must reach for a pass (raised by the tile rule)
  int tile_multiple = 0;       // ... and at least this many of the kernel's largest tile
};

// The lengths the cases use, ascending: tiles x {1, 2, 3} +- 1, page +- 1, powers of two up to
// max_len (or `lengths`).
std::vector<int> ladder_lengths(const Capabilities& caps, const SizeOptions& options);

struct SizedCase {
  std::string name;                // "square_t257", "decode_shape_t32768", ...
  Problem problem;                 // inside the kernel's declaration
  std::vector<int> rows;           // query rows checked; empty: all
  std::vector<int> decode_chunks;  // non-empty: run through a decode session in these chunks
  bool backward = false;           // the backward of the problem, against its exact gradient
  // A decode session past its cache's first eviction, judged on `rows` against exact attention
  // over the positions the cache declares it keeps.
  bool retained_set = false;
  // A decode session through the kernel's block tables (Kernel::decode_paged), in
  // `decode_chunks` calls, judged on `rows` against exact causal attention.
  bool paged = false;
};

// Cases at ladder lengths up to full_rows_limit (the `ladder` stage: every row checked); for a
// kernel declaring a backward, its backward at those lengths too (every gradient element).
std::vector<SizedCase> ladder_cases(const Capabilities& caps, const SizeOptions& options);
// Cases above it (the `long` stage: a sample of rows): the forward's, the backward's (dQ on the
// sampled rows, dK and dV on every key), for an evicting cache decode sessions to max_len, and for
// a block-table cache paged decode sessions to square_limit (their work grows as T^2).
std::vector<SizedCase> long_cases(const Capabilities& caps, const SizeOptions& options);

// Rows worth checking in a long problem: the first and last, both sides of the first and last
// query tile edges, the rows whose keys end at a key tile edge, then random ones up to `count`.
// Empty (all rows) when Tq <= count.
std::vector<int> sample_rows(const Problem& p, const Capabilities& caps, int count, std::uint64_t seed);

// Gate 1 on the case's rows: the kernel's output (forward, or the decode session) against the
// exact reference of those rows. A case checked on every row takes its reference from `oracle`
// when given (shared by every kernel of a run); sampled ones compute theirs on `jobs` threads.
// The kernel's outputs for the case: one forward call, or the decode session in its chunks.
Outputs run_sized_case(const SizedCase& c, const Kernel& kernel);

// `kernel_seconds`, when given, receives the time the kernel's own calls took.
Verdict check_sized_case(const SizedCase& c, const Kernel& kernel, int jobs, Oracle* oracle = nullptr,
                         double* kernel_seconds = nullptr);

}  // namespace attest
