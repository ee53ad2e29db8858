// A kernel's declared internal paths (ABI 2.2 path_predicates): each path's name, as the kernel
// reports it, and the problems it takes. With them attest draws each path's problems from its
// predicate instead of discovering paths over the size ladder, and a call served by another path
// than the declaration names is a failure of the kernel's word.
#pragma once

#include <string>
#include <vector>

#include "attest/kernels/contract.h"
#include "attest/model/features.h"
#include "attest/model/problem.h"

namespace attest {

struct PathPredicate {
  std::string path;
  Range batch, heads, q_len, k_len, head_dim, value_dim;                  // {0, 0}: any
  int head_dim_multiple = 0, value_dim_multiple = 0, k_len_multiple = 0;  // 0: any
  bool k_len_not_multiple = false;  // with k_len_multiple: Tk % it != 0 (a remainder path)
  FeatureSet required;              // used by every problem the path takes
  FeatureSet excluded;              // used by none
  bool no_mask = false;             // the path takes only problems with no mask term at all
  // Keys per online-softmax tile on this path (ABI 2.7), e.g. 1 where it rescales per key; 0: the
  // contract's key_tile. Its lengths are drawn around it and its calls bounded with its rescales.
  int key_tile = 0;

  bool matches(const Problem& p) const;
  // "split-kv: B = 1, Tq <= 4, Tk >= 512"
  std::string summary() const;
  // Why the predicate is unusable (an empty range, a multiple below 0), or empty.
  std::string invalid_because() const;
  bool operator==(const PathPredicate&) const = default;
};

// The path a declaration says serves p: the first whose predicate p meets, or nullptr (then any
// path the declaration does not name may serve it).
const PathPredicate* declared_path_for(const std::vector<PathPredicate>& paths, const Problem& p);

// Why serving p by `served` breaks the declaration, or empty.
std::string declared_path_violation(const std::vector<PathPredicate>& paths, const Problem& p,
                                    const std::string& served);

}  // namespace attest
