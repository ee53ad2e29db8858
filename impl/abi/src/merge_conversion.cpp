// Partial attention states (Kernel::merge) as the C ABI and the protocol carry them: o in its
// storage format, lse in float32.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attest/abi/storage_codecs.h"
#include "attest/abi/wire_conversion.h"
#include "attest/kernels/kernel.h"
#include "attest/model/problem.h"
#include "format_codes.h"

namespace attest {

protocol::WireMerge to_wire(const MergeInputs& in) {
  protocol::WireMerge w;
  w.parts = in.parts, w.rows = in.rows, w.value_dim = in.value_dim;
  w.storage = abi_formats::code_of(in.storage);
  w.o = stored(std::vector<float>(in.o.begin(), in.o.end()), in.storage);
  w.lse.assign(in.lse.begin(), in.lse.end());
  return w;
}

MergeInputs merge_inputs_of(const attest_merge_inputs& in, std::vector<float>& o) {
  auto fail = [](const std::string& why) { throw ProblemError("merge: " + why); };
  if (in.storage != ATTEST_F32 && in.storage != ATTEST_BF16)
    fail("storage is " + std::to_string(in.storage) + ": ATTEST_F32 or ATTEST_BF16");
  if (in.parts < 1 || in.rows < 0 || in.value_dim < 1) fail("parts and value_dim must be >= 1, rows >= 0");
  const std::size_t rows = std::size_t(in.parts) * std::size_t(in.rows);
  if (rows > 0 && (!in.o || !in.lse)) fail("o or lse is NULL");
  MergeInputs m;
  m.parts = in.parts, m.rows = in.rows, m.value_dim = in.value_dim;
  m.storage = abi_formats::scalar_of(in.storage, "merge storage");
  o = floats_from_storage(static_cast<const std::uint8_t*>(in.o), rows * std::size_t(in.value_dim), m.storage);
  m.o = o;
  m.lse = std::span<const float>(in.lse, rows);
  return m;
}

}  // namespace attest
