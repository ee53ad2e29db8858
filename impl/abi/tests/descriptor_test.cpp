// A descriptor's fields are read with their ranges: a value outside them is refused with the
// field's name, never read as the nearest meaning (issue 22).
#include <gtest/gtest.h>

#include <stdexcept>

#include "attest/abi_adapter.h"

namespace attest {
namespace {

TEST(Descriptor, EmptyRowPolicyOutsideTheEnumIsRefused) {
  protocol::Descriptor d;
  d.abi_version = ATTEST_ABI_VERSION_2;
  d.capabilities = ATTEST_CAP_CAUSAL;
  for (int policy : {ATTEST_EMPTY_ZERO, ATTEST_EMPTY_NAN}) {
    d.empty_rows = policy;
    EXPECT_NO_THROW(capabilities_from_descriptor(d)) << policy;
  }
  for (int policy : {5, -1, 2}) {
    d.empty_rows = policy;
    try {
      capabilities_from_descriptor(d);
      ADD_FAILURE() << "empty_rows " << policy << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("empty_rows"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace attest
