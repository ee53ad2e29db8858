// Every property of the catalogue against every built-in kernel that declares what it needs.
// Cases per test: 40 x ATTEST_PROPERTY_SCALE; the seed is ATTEST_SEED or the clock, always printed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>

#include "attest/properties/property_driver.h"

namespace attest {
namespace {

struct Pair {
  std::string property;
  std::string kernel;
};

void PrintTo(const Pair& p, std::ostream* os) { *os << p.property << " on " << p.kernel; }

class PropertySuite : public ::testing::TestWithParam<Pair> {};

TEST_P(PropertySuite, HoldsOnGeneratedProblems) {
  const PropertyInfo& property = find_property(GetParam().property);
  const auto kernel = make_kernel(GetParam().kernel);
  if (!property_applies(property, *kernel)) GTEST_SKIP() << "kernel does not declare what the property needs";
  DriveOptions options;
  options.cases = scaled_cases(40);
  const char* seed = std::getenv("ATTEST_SEED");
  options.seed = seed ? std::strtoull(seed, nullptr, 10) : 0;
  const DriveResult r = drive_property(property, *kernel, options);
  std::cout << "seed " << r.seed << ": " << r.cases << " cases, worst utilisation " << r.worst_utilisation
            << "\nlabels:";
  for (const auto& [label, count] : r.label_counts) std::cout << " " << label << "=" << count;
  std::cout << "\n";
  EXPECT_TRUE(r.passed) << r.message << "\nreproduce: RC_PARAMS=\"" << r.reproduce << "\" or ATTEST_SEED=" << r.seed
                        << "\ncounterexample: " << r.counterexample_path;
  EXPECT_GT(r.cases, 0) << r.message;
}

std::vector<Pair> pairs() {
  std::vector<Pair> out;
  for (const PropertyInfo& p : property_catalogue())
    for (const KernelEntry& k : kernel_registry()) out.push_back({p.name, k.name});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, PropertySuite, ::testing::ValuesIn(pairs()),
                         [](const auto& info) { return info.param.property + "__" + info.param.kernel; });

}  // namespace
}  // namespace attest
