// Messages a kernel engineer reads name the field, its value and what is accepted, in their terms:
// never a function of attest's own.
#include <gtest/gtest.h>

#include <string>

#include "attest/model/precision.h"
#include "attest/properties/problem_file.h"

namespace attest {
namespace {

ProblemFile small_file() {
  ProblemFile file;
  file.problem.shape = {.batch = 1, .heads = 1, .kv_heads = 1, .q_len = 1, .k_len = 2, .head_dim = 32, .value_dim = 2};
  file.problem.resize_buffers();
  file.property = "matches_reference";
  file.kernel = "loop";
  return file;
}

// A storage format attest does not know lists every one it does, quantized ones included.
TEST(UserMessages, AnUnknownStorageListsEveryAcceptedName) {
  std::string text = to_json(small_file());
  const std::string field = "\"k\": \"f32\"";
  ASSERT_NE(text.find(field), std::string::npos) << text;
  text.replace(text.find(field), field.size(), "\"k\": \"q9\"");
  try {
    from_json(text);
    FAIL() << "storage q9 was accepted";
  } catch (const ProblemFileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("storage.k"), std::string::npos) << what;
    EXPECT_NE(what.find("q9"), std::string::npos) << what;
    for (const char* name : {"f32", "bf16", "f16", "e4m3", "e5m2", "q8", "q4", "q8_token", "q8_head", "q4_0"})
      EXPECT_NE(what.find(name), std::string::npos) << name << " missing from: " << what;
  }
  EXPECT_EQ(scalar_names(), "f32, bf16, f16, e4m3, e5m2, q8, q4, q8_token, q8_head or q4_0");
}

// A K row a scaled format cannot hold says what the format holds, not which function of attest's
// would have rounded it.
TEST(UserMessages, AnUnrepresentableRowNamesNoFunction) {
  ProblemFile file = small_file();
  file.problem.storage.k = Scalar::kQ8;
  for (std::size_t i = 0; i < file.problem.k.size(); ++i) file.problem.k[i] = 0.001f * float(i * i) + 0.3f;
  try {
    file.problem.validate();
    FAIL() << "an unfitted q8 row was accepted";
  } catch (const ProblemError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("k row 0"), std::string::npos) << what;
    EXPECT_NE(what.find("q8"), std::string::npos) << what;
    EXPECT_EQ(what.find("fit_rows"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace attest
