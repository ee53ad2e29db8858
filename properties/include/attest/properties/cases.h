// Deterministic problems: the golden examples and the edge-hitting grid (certify, tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attest/model/problem.h"

namespace attest {

struct NamedProblem {
  std::string name;
  Problem problem;
};

// Fills q, k, v with uniform values of unit variance times magnitude (reproducible by seed).
void fill_random(Problem& p, std::uint64_t seed, double magnitude = 1.0);

// One batch, one head, Dv = Dk, unit-variance random data: the problem the benchmarks time.
Problem benchmark_problem(int q_len, int k_len, int head_dim, bool causal);

// Q = K = [[1,0],[0,1],[1,1]], V = [[1,0],[0,2],[3,1]], causal, scale 1/sqrt(2).
Problem worked_example();

// The worked example, one token, one key, rows that end up empty.
std::vector<NamedProblem> golden_problems();

// Tile sizes +-1, page size +-1, Tq < Tk, Tq > Tk, Tq = 1, Tk = 1, GQA ratios 1/2/4/all,
// every mask kind alone and combined, empty rows, Dk != Dv, RoPE.
std::vector<NamedProblem> grid_problems();

}  // namespace attest
