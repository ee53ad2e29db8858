// The coverage model (docs/design.md#coverage-model): the axes of a declared domain and their classes, the regions
// a kernel is likely to treat differently. Every problem belongs to one class per axis (to several
// on the mask and modifier axes: each term it uses); certify requires effective cases for every
// class (quick) or every pair of classes of two axes (default, thorough) on every internal path.
#pragma once

#include <string>
#include <vector>

#include "attest/kernels/kernel.h"

namespace attest {

struct CoverageAxis {
  std::string name;                  // "heads"
  std::vector<std::string> classes;  // qualified: "heads: > 8"
};

// The axes and classes a declaration can reach at all: undeclared features, and widths, heads and
// batches outside the contract, are left out (a property's own needs may rule out more).
std::vector<CoverageAxis> coverage_axes(const Capabilities& caps);

// The classes of p, qualified by axis ("width: production", "mask: causal", "keys: partial last tile").
// Tiles are the declared ones (32 where a kernel declares none).
std::vector<std::string> coverage_classes(const Problem& p, const Capabilities& caps);

// A coverage target: one class (strength 1), or two or three classes of different axes (strength
// 2, 3), as "mask: none + modifier: softcap" (in table order).
std::string target_name(const std::vector<std::string>& classes);
std::vector<std::string> target_classes(const std::string& name);
// The targets of a given strength that a problem with these classes covers.
std::vector<std::string> targets_of(const std::vector<std::string>& classes, int strength);
// Every target of a strength over the axes (pairs and triples only across distinct axes), in table order.
std::vector<std::string> all_targets(const std::vector<CoverageAxis>& axes, int strength);

// The value regimes of p (the "values" axis): "ordinary", or any of "range edge" (logits of 1e4
// and more, or values past the square root of their format's largest), "subnormal" (an input
// below its format's normal range) and "poison" (a key no row sees holding NaN, inf or 1e30).
std::vector<std::string> value_regimes(const Problem& p);

// The axis of a qualified class ("mask" for "mask: causal") and its value ("causal").
std::string axis_of(const std::string& cls);
std::string value_of(const std::string& cls);

}  // namespace attest
