#include "attest/properties/precision_limit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "attest/kernels/builtin_kernels.h"

namespace attest {
namespace {

// One query against t keys with equal scores (Q = K = 0) and every value `value`: exact output `value`.
float model_output(const Kernel& model, long long t, float value) {
  Problem p;
  p.shape = {1, 1, 1, 1, static_cast<int>(t), 1, 1};
  p.resize_buffers();
  std::fill(p.v.begin(), p.v.end(), value);
  return run_forward(model, p).o[0];
}

// The first length 1, 2, 4, ... up to the horizon at which `fails` holds for the model's output.
std::optional<std::pair<long long, float>> first_failure(const Kernel& model, float value, auto fails) {
  for (long long t = 1; t <= kPrecisionLimitHorizon; t *= 2)
    if (const float o = model_output(model, t, value); fails(o)) return std::pair{t, o};
  return std::nullopt;
}

}  // namespace

std::vector<PrecisionLimit> precision_limits(const Precision& p, double max_abs_value) {
  std::vector<PrecisionLimit> out;
  const auto model = make_model_kernel(p);
  // Half the largest V that both V's and O's storage hold: far from the edge, where the last
  // rounding of an exact sum could tip it over, but one doubling of the sum away from overflow.
  // Or the contract's largest |V| when it promises less.
  double v = std::min(info(p.v).max_finite, info(p.o).max_finite) / 2;
  if (max_abs_value > 0) v = std::min(v, max_abs_value);
  const float largest = round_to(static_cast<float>(v), p.v);
  if (const auto hit = first_failure(*model, largest, [](float o) { return !std::isfinite(o); }))
    out.push_back({"", "overflow", hit->first,
                   fmt::format("{} equal keys of V = {:g} give {}", hit->first, largest, hit->second)});
  if (const auto hit = first_failure(*model, 1.0f, [](float o) { return !(std::fabs(o - 1.0f) <= 0.01f); }))
    out.push_back(
        {"", "accuracy", hit->first, fmt::format("{} equal keys of V = 1 give {:g}", hit->first, hit->second)});
  return out;
}

std::vector<PrecisionLimit> precision_limits(const Capabilities& c) {
  std::vector<PrecisionLimit> out = precision_limits(c.precision, c.contract.max_abs_value);
  for (const auto& [path, p] : c.path_precision)
    for (PrecisionLimit limit : precision_limits(p, c.contract.max_abs_value)) {
      limit.path = path;
      out.push_back(limit);
    }
  return out;
}

std::string limits_text(const std::vector<PrecisionLimit>& limits) {
  std::string out;
  for (const PrecisionLimit& l : limits)
    out +=
        fmt::format("{}{}{} from T = {} ({})", out.empty() ? "" : "; ", l.path.empty() ? "" : "path " + l.path + ": ",
                    l.kind == "overflow" ? "overflow" : "error above 1%", l.length, l.detail);
  return out;
}

}  // namespace attest
