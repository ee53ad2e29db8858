// The C header and the C++ wire code against the interface table (attest/abi/interface/*.def): every
// row's constant exists in attest_abi.h with the table's value, every header constant has its row,
// and every payload the C++ code writes or reads has the table's fields in the table's order.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "attest/abi/process_protocol.hpp"
#include "attest/attest_abi.h"

namespace attest::protocol {
namespace {

// ---- constants: checked at compile time, each failure naming its row ---------------------------

#define ATTEST_INTERFACE_VERSION(abi_major, abi_minor, protocol)                                        \
  static_assert(abi_major == ATTEST_ABI_VERSION_2, "version.def: ABI major");                           \
  static_assert(abi_minor == ATTEST_ABI_MINOR, "version.def: ABI minor differs from ATTEST_ABI_MINOR"); \
  constexpr int kTableMinor = abi_minor;
#include "attest/abi/interface/version.def"
#undef ATTEST_INTERFACE_VERSION

// A row added in a version the header does not speak fails here with its name.
constexpr bool known_version(int major, int minor) {
  return major == 1 ? minor == 0 : major == 2 && minor <= kTableMinor;
}

#define ATTEST_STATUS(name, NAME, value, major, minor) \
  static_assert(ATTEST_##NAME == value && known_version(major, minor), "statuses.def: " #name);
#include "attest/abi/interface/statuses.def"
#undef ATTEST_STATUS

#define ATTEST_CAPABILITY(name, NAME, bit, major, minor) \
  static_assert(ATTEST_CAP_##NAME == (1u << bit) && known_version(major, minor), "capabilities.def: " #name);
#include "attest/abi/interface/capabilities.def"
#undef ATTEST_CAPABILITY

#define ATTEST_FORMAT(name, NAME, value, major, minor) \
  static_assert(ATTEST_##NAME == value && known_version(major, minor), "formats.def: " #name);
#include "attest/abi/interface/formats.def"
#undef ATTEST_FORMAT

#define ATTEST_EMPTY_ROWS(name, NAME, value, major, minor) \
  static_assert(ATTEST_EMPTY_##NAME == value && known_version(major, minor), "empty_rows.def: " #name);
#include "attest/abi/interface/empty_rows.def"
#undef ATTEST_EMPTY_ROWS

#define ATTEST_ALIBI_SLOPES(name, NAME, value, major, minor) \
  static_assert(ATTEST_ALIBI_##NAME == value && known_version(major, minor), "alibi_slopes.def: " #name);
#include "attest/abi/interface/alibi_slopes.def"
#undef ATTEST_ALIBI_SLOPES

#define ATTEST_INPUT_DOMAIN(name, NAME, value, major, minor) \
  static_assert(ATTEST_INPUTS_##NAME == value && known_version(major, minor), "input_domains.def: " #name);
#include "attest/abi/interface/input_domains.def"
#undef ATTEST_INPUT_DOMAIN

#define ATTEST_CACHE_POLICY(name, NAME, value, major, minor) \
  static_assert(ATTEST_CACHE_##NAME == value && known_version(major, minor), "cache_policies.def: " #name);
#include "attest/abi/interface/cache_policies.def"
#undef ATTEST_CACHE_POLICY

#define ATTEST_MESSAGE(Name, id, major, minor) \
  static_assert(std::uint32_t(Type::k##Name) == id && known_version(major, minor), "messages.def: " #Name);
#define ATTEST_MESSAGE_FIELD(Name, type, field)
#include "attest/abi/interface/messages.def"
#undef ATTEST_MESSAGE
#undef ATTEST_MESSAGE_FIELD

// The other way: the header holds no constant the table lacks (its values run 0, 1, ... up to
// the last one the header names, with every one of them a row).
template <typename Row>
constexpr std::uint64_t mask_of(std::initializer_list<Row> values) {
  std::uint64_t mask = 0;
  for (Row v : values) mask |= std::uint64_t{1} << v;
  return mask;
}
#define ROW_VALUE(name, NAME, value, major, minor) value,
#define ROW_BIT(name, NAME, bit, major, minor) bit,
static_assert(mask_of<int>({
#define ATTEST_STATUS ROW_VALUE
#include "attest/abi/interface/statuses.def"
#undef ATTEST_STATUS
              }) == (std::uint64_t{1} << (ATTEST_INTERNAL_ERROR + 1)) - 1,
              "statuses.def: an attest_status has no row");
static_assert(mask_of<int>({
#define ATTEST_CAPABILITY ROW_BIT
#include "attest/abi/interface/capabilities.def"
#undef ATTEST_CAPABILITY
              }) == std::uint64_t{ATTEST_CAP_PACKED_INT64} * 2 - 1,
              "capabilities.def: an ATTEST_CAP_ bit has no row");
static_assert(mask_of<int>({
#define ATTEST_FORMAT ROW_VALUE
#include "attest/abi/interface/formats.def"
#undef ATTEST_FORMAT
              }) == (std::uint64_t{1} << (ATTEST_Q4_0 + 1)) - 1,
              "formats.def: an attest_precision has no row");
static_assert(mask_of<int>({
#define ATTEST_EMPTY_ROWS ROW_VALUE
#include "attest/abi/interface/empty_rows.def"
#undef ATTEST_EMPTY_ROWS
              }) == (std::uint64_t{1} << (ATTEST_EMPTY_NAN + 1)) - 1,
              "empty_rows.def: an attest_empty_rows has no row");
static_assert(mask_of<int>({
#define ATTEST_ALIBI_SLOPES ROW_VALUE
#include "attest/abi/interface/alibi_slopes.def"
#undef ATTEST_ALIBI_SLOPES
              }) == (std::uint64_t{1} << (ATTEST_ALIBI_STANDARD + 1)) - 1,
              "alibi_slopes.def: an attest_alibi_slopes has no row");
static_assert(mask_of<int>({
#define ATTEST_INPUT_DOMAIN ROW_VALUE
#include "attest/abi/interface/input_domains.def"
#undef ATTEST_INPUT_DOMAIN
              }) == (std::uint64_t{1} << (ATTEST_INPUTS_MASKED_SCORED + 1)) - 1,
              "input_domains.def: an attest_input_domain has no row");
static_assert(mask_of<int>({
#define ATTEST_CACHE_POLICY ROW_VALUE
#include "attest/abi/interface/cache_policies.def"
#undef ATTEST_CACHE_POLICY
              }) == (std::uint64_t{1} << (ATTEST_CACHE_EXPLICIT + 1)) - 1,
              "cache_policies.def: an attest_cache_policy has no row");
#undef ROW_VALUE
#undef ROW_BIT
static_assert(mask_of<std::uint32_t>({
#define ATTEST_MESSAGE(Name, id, major, minor) id,
#define ATTEST_MESSAGE_FIELD(Name, type, field)
#include "attest/abi/interface/messages.def"
#undef ATTEST_MESSAGE
#undef ATTEST_MESSAGE_FIELD
              }) == (std::uint64_t{1} << (kLastType + 1)) - 2,
              "messages.def: the frame types are not 1 to kLastType");

TEST(InterfaceTable, MaskTermsAreTheHeadersInWireOrder) {
  std::vector<std::string> table, header;
#define ATTEST_MASK_TERM(name, CAPABILITY, major, minor) table.push_back(#name "/" #CAPABILITY);
#include "attest/abi/interface/mask_terms.def"
#undef ATTEST_MASK_TERM
  const std::vector<std::pair<std::string, std::uint32_t>> caps = {
#define ATTEST_CAPABILITY(name, NAME, bit, major, minor) {#NAME, 1u << bit},
#include "attest/abi/interface/capabilities.def"
#undef ATTEST_CAPABILITY
  };
  auto cap_name = [&](std::uint32_t bit) {
    for (const auto& [name, value] : caps)
      if (value == bit) return name;
    return std::string("?");
  };
#define ATTEST_TERM_ROW(name, cap) header.push_back(#name "/" + cap_name(cap));
  ATTEST_INTEGER_MASK_TERMS(ATTEST_TERM_ROW)
#undef ATTEST_TERM_ROW
  EXPECT_EQ(table, header);
}

// ---- payloads: the C++ writers and readers against the table's field lists --------------------

struct Field {
  std::string type, name;
  int minor;
};

std::vector<Field> layout(const std::string& name) {
  std::vector<Field> fields;
#define ATTEST_LAYOUT_FIELD(layout, major, minor, type, field) \
  if (name == #layout) fields.push_back({#type, #field, minor});
#include "attest/abi/interface/layouts.def"
#undef ATTEST_LAYOUT_FIELD
  if (fields.empty()) ADD_FAILURE() << "layouts.def has no layout " << name;
  return fields;
}

std::vector<Field> message(const std::string& name) {
  std::vector<Field> fields;
#define ATTEST_MESSAGE(Name, id, major, minor)
#define ATTEST_MESSAGE_FIELD(Name, type, field) \
  if (name == #Name) fields.push_back({#type, #field, 0});
#include "attest/abi/interface/messages.def"
#undef ATTEST_MESSAGE
#undef ATTEST_MESSAGE_FIELD
  return fields;
}

void walk(Reader& r, const std::vector<Field>& fields);

// Reads one field of the table's type `type` (an f32 bias), failing on a type it does not know.
void walk_field(Reader& r, const std::string& type) {
  if (type == "u32")
    r.u32();
  else if (type == "i32")
    r.i32();
  else if (type == "u64")
    r.u64();
  else if (type == "i64")
    r.i64();
  else if (type == "f64")
    r.f64();
  else if (type == "str")
    r.str();
  else if (type == "u8_array")
    r.array<std::uint8_t>();
  else if (type == "i32_array")
    r.array<std::int32_t>();
  else if (type == "i64_array")
    r.array<std::int64_t>();
  else if (type == "f32_array" || type == "bias_array")
    r.array<float>();
  else if (type.rfind("list_", 0) == 0)
    for (std::uint32_t n = r.u32(); n > 0; --n) walk(r, layout(type.substr(5)));
  else
    walk(r, layout(type));
}

void walk(Reader& r, const std::vector<Field>& fields) {
  for (const Field& f : fields) walk_field(r, f.type);
}

// A payload of the table's fields: numbers 0, strings "x", arrays of two elements.
void fill(Writer& w, const std::vector<Field>& fields) {
  for (const Field& f : fields) {
    const std::string& t = f.type;
    if (t == "u32")
      w.u32(0);
    else if (t == "i32")
      w.i32(0);
    else if (t == "u64")
      w.u64(0);
    else if (t == "i64")
      w.i64(0);
    else if (t == "f64")
      w.f64(0);
    else if (t == "str")
      w.str("x");
    else if (t == "u8_array")
      w.array(std::vector<std::uint8_t>{1, 2});
    else if (t == "i32_array")
      w.array(std::vector<std::int32_t>{1, 2});
    else if (t == "i64_array")
      w.array(std::vector<std::int64_t>{1, 2});
    else if (t == "f32_array")
      w.array(std::vector<float>{1, 2});
    else
      ADD_FAILURE() << "a reply field of type " << t;
  }
}

WireProblem small_problem() {
  WireProblem p;
  p.header.batch = p.header.heads = p.header.kv_heads = p.header.q_len = p.header.k_len = 1;
  p.header.head_dim = p.header.value_dim = 2;
  p.kv_valid = {1};
  p.sinks = {0.5f};
  p.bias = {1.0f};
  p.q = p.k = p.v = std::vector<std::uint8_t>(8, 0);
  return p;
}

WireDecodeConfig small_config() {
  WireDecodeConfig c;
  c.header.batch = c.header.heads = c.header.kv_heads = 1;
  c.header.head_dim = c.header.value_dim = 2;
  c.k_scales = c.v_scales = {1.0f};
  return c;
}

TEST(InterfaceTable, RequestsAreWrittenAsTheTableSays) {
  Writer problem;
  write_problem(problem, small_problem());
  Reader r(problem.bytes());
  walk(r, message("Forward"));
  EXPECT_TRUE(r.at_end()) << "FORWARD";

  Writer config;
  write_decode_config(config, small_config());
  Reader c(config.bytes());
  walk(c, message("DecodeOpen"));
  EXPECT_TRUE(c.at_end()) << "DECODE_OPEN";

  WireBackward backward;
  backward.problem = small_problem();
  backward.o = backward.d_o = std::vector<std::uint8_t>(8, 0);
  backward.lse = {0.0f};
  Writer b;
  write_backward(b, backward);
  Reader rb(b.bytes());
  walk(rb, message("Backward"));
  EXPECT_TRUE(rb.at_end()) << "BACKWARD";

  WireMerge merge;
  merge.parts = merge.rows = 1, merge.value_dim = 2;
  merge.o = std::vector<std::uint8_t>(8, 0), merge.lse = {0.0f};
  Writer m;
  write_merge(m, merge);
  Reader rm(m.bytes());
  walk(rm, message("Merge"));
  EXPECT_TRUE(rm.at_end()) << "MERGE";

  WirePacked packed;
  packed.header.batch = packed.header.heads = packed.header.kv_heads = 1;
  packed.header.head_dim = packed.header.value_dim = 2;
  packed.cu_seqlens_q = packed.cu_seqlens_k = {0, 1};
  packed.q = packed.k = packed.v = {0.0f, 0.0f};
  Writer pk;
  write_packed(pk, packed);
  Reader rpk(pk.bytes());
  walk(rpk, message("ForwardPacked"));
  EXPECT_TRUE(rpk.at_end()) << "FORWARD_PACKED";
  Reader again(pk.bytes());
  EXPECT_NO_THROW(read_packed(again)) << "FORWARD_PACKED: read_packed disagrees with write_packed";

  WirePagedStep step;
  const std::vector<std::uint8_t> pool(64, 0);
  step.page_bytes = 64, step.pool = pool, step.table_width = 1, step.tables = {0}, step.lengths = {0};
  step.counts = {1}, step.q = step.k = step.v = std::vector<std::uint8_t>(8, 0);
  Writer paged;
  write_decode_config(paged, small_config(), true);
  write_paged_step(paged, step);
  Reader rp(paged.bytes());
  walk(rp, message("DecodePaged"));
  EXPECT_TRUE(rp.at_end()) << "DECODE_PAGED";
}

template <typename ReadFn>
void expect_read(const char* name, ReadFn read) {
  Writer w;
  fill(w, message(name));
  Reader r(w.bytes());
  EXPECT_NO_THROW(read(r)) << name << ": the C++ reader disagrees with messages.def";
}

TEST(InterfaceTable, RepliesAreReadAsTheTableSays) {
  expect_read("ForwardResult", read_forward_result);
  expect_read("BackwardResult", read_backward_result);
  expect_read("DecodeOpened", read_decode_opened);
  expect_read("DecodeResult", read_decode_result);
  expect_read("Retained", read_retained);
  expect_read("DecodePagedResult", read_paged_result);
  expect_read("MergeResult", read_merge_result);
  expect_read("ForwardPackedResult", read_packed_result);
}

// The descriptor: every member the table names gets its own value, and write_descriptor must put
// each where the table says.
template <typename T>
void set(T& member, int value) {
  if constexpr (std::is_arithmetic_v<T>)
    member = static_cast<T>(value);
  else if constexpr (std::is_same_v<T, std::string>)
    member = "kernel";
  else if constexpr (std::is_same_v<T, std::vector<std::int32_t>>)
    member = {value};
  else
    member.resize(1);  // a list: one element, read through its layout
}

template <typename T>
void expect_member(Reader& r, const std::string& type, const char* name, const T& member) {
  SCOPED_TRACE(name);
  if constexpr (std::is_arithmetic_v<T>) {
    double read = 0;
    if (type == "u32")
      read = r.u32();
    else if (type == "i32")
      read = r.i32();
    else if (type == "i64")
      read = double(r.i64());
    else if (type == "f64")
      read = r.f64();
    else
      ADD_FAILURE() << "a number of type " << type;
    EXPECT_EQ(read, double(member));
  } else if constexpr (std::is_same_v<T, std::string>) {
    ASSERT_EQ(type, "str");
    EXPECT_EQ(r.str(), member);
  } else if constexpr (std::is_same_v<T, std::vector<std::int32_t>>) {
    ASSERT_EQ(type, "i32_array");
    EXPECT_EQ(r.array<std::int32_t>(), member);
  } else {
    ASSERT_EQ(type.rfind("list_", 0), 0u);
    const std::uint32_t n = r.u32();
    EXPECT_EQ(n, member.size());
    for (std::uint32_t i = 0; i < n; ++i) walk(r, layout(type.substr(5)));
  }
}

TEST(InterfaceTable, DescriptorIsWrittenAsTheTableSays) {
  Descriptor d;
  int value = 1;
#define ATTEST_DESCRIPTOR_FIELD(major, minor, type, member) set(d.member, value++);
#include "attest/abi/interface/descriptor.def"
#undef ATTEST_DESCRIPTOR_FIELD
  Writer w;
  write_descriptor(w, d);
  Reader r(w.bytes());
#define ATTEST_DESCRIPTOR_FIELD(major, minor, type, member) expect_member(r, #type, #member, d.member);
#include "attest/abi/interface/descriptor.def"
#undef ATTEST_DESCRIPTOR_FIELD
  EXPECT_TRUE(r.at_end()) << "DESCRIPTOR: write_descriptor writes more than descriptor.def lists";
  Reader back(w.bytes());
  const Descriptor read = read_descriptor(back);
  EXPECT_EQ(read.page_tokens, d.page_tokens);
  EXPECT_EQ(read.paths.size(), 1u);
}

}  // namespace
}  // namespace attest::protocol
