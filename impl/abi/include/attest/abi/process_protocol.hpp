// attest process protocol, version 3 (header-only, C++17; its DESCRIPTOR may carry ABI 2.1's section): how a separate
// program serves a kernel to attest over a pair of private file descriptors (ATTEST_PROTOCOL_FDS="IN,OUT"; the
// program's stdout goes to attest's stderr). Documented in impl/PROTOCOL.md.
//
// Every message is a frame: u32 magic "ATST" (0x54535441), u32 type, u64 payload bytes, payload.
// All integers and floats little-endian. Strings: u32 length + bytes. Arrays: u64 count +
// elements. attest speaks first (HELLO); the kernel answers every request with one frame.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "attest/attest_abi.h"

namespace attest::protocol {

inline constexpr std::uint32_t kMagic = 0x54535441u;  // bytes 'A' 'T' 'S' 'T'
// The protocol version: the table's (attest/abi/interface/version.def; 3: the integer mask terms travel as one i32
// array).
#define ATTEST_INTERFACE_VERSION(abi_major, abi_minor, protocol) inline constexpr std::uint32_t kVersion = protocol;
#include "attest/abi/interface/version.def"
#undef ATTEST_INTERFACE_VERSION
inline constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 34;  // 16 GiB: refuse anything larger
// The largest descriptor attest reads: its path names and predicates are what make one long.
inline constexpr std::uint64_t kMaxDescriptorBytes = std::uint64_t{64} * 1024;

// The frame types and their payloads: attest/abi/interface/messages.def (who sends each, and when).
enum class Type : std::uint32_t {
#define ATTEST_MESSAGE(Name, id, major, minor) k##Name = (id),
#define ATTEST_MESSAGE_FIELD(Name, type, field)
#include "attest/abi/interface/messages.def"
#undef ATTEST_MESSAGE
#undef ATTEST_MESSAGE_FIELD
};

// The largest type: the table's last row (interface_table_test checks the ids run 1, 2, ...).
inline constexpr std::uint32_t kLastType = 0
// NOLINTNEXTLINE(bugprone-macro-parentheses): a term of the sum 0 +1 +1 ..., not an expression
#define ATTEST_MESSAGE(Name, id, major, minor) +1
#define ATTEST_MESSAGE_FIELD(Name, type, field)
#include "attest/abi/interface/messages.def"
#undef ATTEST_MESSAGE
#undef ATTEST_MESSAGE_FIELD
    ;

class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Writer {
 public:
  Writer& u32(std::uint32_t x) { return raw(&x, 4); }
  Writer& i32(std::int32_t x) { return raw(&x, 4); }
  Writer& u64(std::uint64_t x) { return raw(&x, 8); }
  Writer& i64(std::int64_t x) { return raw(&x, 8); }
  Writer& f64(double x) { return raw(&x, 8); }
  Writer& str(const std::string& s) {
    u32(static_cast<std::uint32_t>(s.size()));
    return raw(s.data(), s.size());
  }
  template <typename T>
  Writer& array(const T* data, std::uint64_t count) {
    u64(count);
    return raw(data, count * sizeof(T));
  }
  template <typename T>
  Writer& array(const std::vector<T>& v) {
    return array(v.data(), v.size());
  }
  template <typename T>
  Writer& array(std::span<const T> v) {
    return array(v.data(), v.size());
  }
  // Bytes with no count before them (a message whose head already gave it).
  Writer& append(std::span<const std::uint8_t> v) { return raw(v.data(), v.size()); }
  const std::string& bytes() const { return buf_; }

 private:
  Writer& raw(const void* p, std::size_t n) {
    buf_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string buf_;
};

class Reader {
 public:
  explicit Reader(const std::string& payload) : p_(payload.data()), end_(payload.data() + payload.size()) {}
  std::uint32_t u32() { return pod<std::uint32_t>(); }
  std::int32_t i32() { return pod<std::int32_t>(); }
  std::uint64_t u64() { return pod<std::uint64_t>(); }
  std::int64_t i64() { return pod<std::int64_t>(); }
  double f64() { return pod<double>(); }
  std::string str() {
    const std::uint32_t n = u32();
    need(n);
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  template <typename T>
  std::vector<T> array() {
    const std::uint64_t n = u64();
    if (n > static_cast<std::uint64_t>(end_ - p_) / sizeof(T)) throw ProtocolError("array longer than its message");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), p_, n * sizeof(T));
    p_ += n * sizeof(T);
    return v;
  }
  // A byte array as a view into the message (valid while the message lives): a pool of pages is
  // not copied again on its way through.
  std::span<const std::uint8_t> byte_view() {
    const std::uint64_t n = u64();
    if (n > static_cast<std::uint64_t>(end_ - p_)) throw ProtocolError("array longer than its message");
    const std::span<const std::uint8_t> v(reinterpret_cast<const std::uint8_t*>(p_), n);
    p_ += n;
    return v;
  }
  void expect_end() const {
    if (p_ != end_) throw ProtocolError("message has trailing bytes");
  }
  bool at_end() const { return p_ == end_; }

 private:
  template <typename T>
  T pod() {
    need(sizeof(T));
    T x;
    std::memcpy(&x, p_, sizeof(T));
    p_ += sizeof(T);
    return x;
  }
  void need(std::size_t n) const {
    if (static_cast<std::size_t>(end_ - p_) < n) throw ProtocolError("message ends early");
  }
  const char* p_;
  const char* end_;
};

// Blocking helpers for the kernel side (attest's side adds timeouts).
inline bool read_exact(int fd, void* buf, std::size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

inline bool write_exact(int fd, const void* buf, std::size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

inline std::string frame_header(Type type, std::uint64_t payload_size) {
  Writer w;
  w.u32(kMagic).u32(static_cast<std::uint32_t>(type)).u64(payload_size);
  return w.bytes();
}

inline bool write_frame(int fd, Type type, const std::string& payload) {
  const std::string header = frame_header(type, payload.size());
  return write_exact(fd, header.data(), header.size()) && write_exact(fd, payload.data(), payload.size());
}

// Parses a 16-byte frame header; throws ProtocolError on a bad magic or size.
inline std::pair<Type, std::uint64_t> parse_header(const char (&header)[16]) {
  std::uint32_t magic, type;
  std::uint64_t size;
  std::memcpy(&magic, header, 4);
  std::memcpy(&type, header + 4, 4);
  std::memcpy(&size, header + 8, 8);
  if (magic != kMagic) throw ProtocolError("bad frame magic (not the attest protocol?)");
  if (type < 1 || type > kLastType) throw ProtocolError("unknown message type " + std::to_string(type));
  if (size > kMaxPayload) throw ProtocolError("message of " + std::to_string(size) + " bytes is too large");
  return {static_cast<Type>(type), size};
}

// Reads one frame (blocking), refusing a payload larger than max_payload before allocating it.
// Returns false on a clean end of input.
inline bool read_frame(int fd, Type& type, std::string& payload, std::uint64_t max_payload = kMaxPayload) {
  char header[16];
  if (!read_exact(fd, header, sizeof header)) return false;
  std::uint64_t size;
  std::tie(type, size) = parse_header(header);
  if (size > max_payload)
    throw ProtocolError("message of " + std::to_string(size) + " bytes exceeds the " + std::to_string(max_payload) +
                        " this exchange allows");
  payload.resize(size);
  if (size && !read_exact(fd, payload.data(), size)) throw ProtocolError("input ended inside a message");
  return true;
}

// Bytes per element of a float storage type (ATTEST_F32, ATTEST_BF16, ATTEST_F16).
inline std::size_t storage_bytes(std::int32_t precision) { return precision == ATTEST_F32 ? 4 : 2; }

// Bytes of `rows` rows of `width` values stored in `precision` (attest_precision's layouts; q8_head
// rows as a decode step carries them, codes only). 0 for a code this build does not know.
inline std::uint64_t stored_size(std::int32_t precision, std::uint64_t rows, std::uint64_t width) {
  const std::uint64_t groups = (width + 31) / 32;
  switch (precision) {
    case ATTEST_F32:
      return rows * width * 4;
    case ATTEST_BF16:
    case ATTEST_F16:
      return rows * width * 2;
    case ATTEST_E4M3:
    case ATTEST_E5M2:
    case ATTEST_Q8_HEAD:
      return rows * width;
    case ATTEST_Q8:
      return rows * (groups * 2 + width);
    case ATTEST_Q4:
    case ATTEST_Q4_0:
      return rows * (groups * 2 + (width + 1) / 2);
    case ATTEST_Q8_TOKEN:
      return rows * (2 + width);
  }
  return 0;
}

// Bytes of a problem's K or V, [outer = B x Hkv][tokens][width], in `precision`: a q8_head buffer
// holds one scale and then the codes of each kv head of each sequence.
inline std::uint64_t stored_kv_size(std::int32_t precision, std::uint64_t outer, std::uint64_t tokens,
                                    std::uint64_t width) {
  if (precision == ATTEST_Q8_HEAD) return outer * (2 + tokens * width);
  return stored_size(precision, outer * tokens, width);
}

// The kernel's descriptor as it travels (version 2 layout; a version-1 kernel's is mapped to it
// by its server: f32 storage, an open contract).
struct PathPrecision {
  std::string path;
  attest_precision_spec precision{};
};
// A declared path (ABI 2.2): the predicate's fields, its name apart (predicate.path is NULL).
struct PathDeclaration {
  std::string path;
  attest_path_predicate predicate{};
};

struct Descriptor {
  std::uint32_t abi_version = 0;  // the kernel's own ABI version, 1 or 2
  std::string name;
  std::uint32_t capabilities = 0;
  std::int32_t empty_rows = 0;
  attest_precision_spec precision{};
  std::vector<std::int32_t> head_dims;
  attest_contract contract{};                   // head_dims travel separately
  std::vector<PathPrecision> paths;             // ABI 2.1
  std::vector<PathDeclaration> declared_paths;  // ABI 2.2
  // ABI 2.4: the decoder's cache policy (attest_cache_policy and its sizes), and whether it reports
  // retained positions (decode_retained is set).
  std::int32_t cache_policy = ATTEST_CACHE_FULL, cache_sinks = 0, cache_recent = 0, reports_retained = 0;
  std::int32_t page_tokens = 0;  // ABI 2.4: block tables (0: none)
  // ABI 2.7: Dv apart from Dk (the widths, and the range; empty and {0, 0}: Dk's range), whether
  // ALiBi and a bias exclude each other, and each declared path's key tile
  // (attest_path_predicate.key_tile) in declared_paths' order (empty: every one 0, the contract's).
  std::vector<std::int32_t> value_dims;
  attest_range value_dim{};
  std::int32_t alibi_excludes_bias = 0;
  std::vector<std::int32_t> declared_key_tiles;
};

// A precision travels as its 2.0 fields, and apart from them (in the descriptor's 2.1 section) the
// fields 2.1 added.
inline void write_precision_2_0(Writer& w, const attest_precision_spec& p) {
  w.i32(p.q).i32(p.k).i32(p.v).i32(p.o).i32(p.scores).i32(p.p).i32(p.accumulator).f64(p.exp_ulps);
}

inline void write_precision_2_1(Writer& w, const attest_precision_spec& p) {
  w.i32(p.bias).i32(p.weight_sum).i32(p.pv_unnormalised).i32(p.q_entry).i32(p.k_entry).i32(p.v_entry);
}

inline void read_precision_2_0(Reader& r, attest_precision_spec& p) {
  p.q = r.i32(), p.k = r.i32(), p.v = r.i32(), p.o = r.i32();
  p.scores = r.i32(), p.p = r.i32(), p.accumulator = r.i32(), p.exp_ulps = r.f64();
}

inline void read_precision_2_1(Reader& r, attest_precision_spec& p) {
  p.bias = r.i32(), p.weight_sum = r.i32(), p.pv_unnormalised = r.i32();
  for (std::int8_t* entry : {&p.q_entry, &p.k_entry, &p.v_entry}) {
    const std::int32_t x = r.i32();
    if (x < -128 || x > 127) throw ProtocolError("an entry rounding out of range");
    *entry = static_cast<std::int8_t>(x);
  }
}

inline void write_range(Writer& w, const attest_range& r) { w.i64(r.min).i64(r.max); }
inline attest_range read_range(Reader& r) {
  attest_range x{};
  x.min = r.i64(), x.max = r.i64();
  return x;
}

// The 2.0 fields, then the section 2.1 added: the contract's new fields, the precision's, and the
// paths; then 2.2's declared paths; then 2.3's i32 deterministic_backward; then 2.4's i32 cache_policy,
// cache_sinks, cache_recent, reports_retained, page_tokens; then 2.7's i32_array value_dims, the range
// value_dim, i32 alibi_excludes_bias, i32_array declared_key_tiles; then 2.9's i32 precision.flush_subnormals
// (the kernel's: a path inherits it). A section is written only when it or a later one
// holds something that is not zero; a descriptor that ends before a section (a kernel written for an
// earlier version) means zeros there.
inline void write_descriptor(Writer& w, const Descriptor& d) {
  const attest_precision_spec& p = d.precision;
  const attest_contract& c = d.contract;
  w.u32(d.abi_version).str(d.name).u32(d.capabilities).i32(d.empty_rows);
  write_precision_2_0(w, p);
  w.array(d.head_dims);
  for (const attest_range* r : {&c.head_dim, &c.batch, &c.heads, &c.q_len, &c.k_len, &c.q_offset}) write_range(w, *r);
  w.i32(c.dk_equals_dv).i32(c.default_scale_only).i32(c.causal_required).i32(c.decode_only);
  w.i32(c.query_tile).i32(c.key_tile).i32(c.decode_lse_optional);
  w.i32(c.self_attention_only).i32(c.alibi_slopes).i32(c.inputs).f64(c.alibi_max_bias).f64(c.max_abs_value);
  write_precision_2_1(w, p);
  w.u32(static_cast<std::uint32_t>(d.paths.size()));
  for (const PathPrecision& path : d.paths) {
    w.str(path.path);
    write_precision_2_0(w, path.precision);
    write_precision_2_1(w, path.precision);
  }
  w.u32(static_cast<std::uint32_t>(d.declared_paths.size()));
  for (const PathDeclaration& declared : d.declared_paths) {
    const attest_path_predicate& x = declared.predicate;
    w.str(declared.path);
    for (const attest_range* r : {&x.batch, &x.heads, &x.q_len, &x.k_len, &x.head_dim, &x.value_dim})
      write_range(w, *r);
    w.i32(x.head_dim_multiple).i32(x.value_dim_multiple).i32(x.k_len_multiple).i32(x.k_len_not_multiple);
    w.u32(x.required).u32(x.excluded).i32(x.no_mask);
  }
  const bool tiles =
      std::any_of(d.declared_key_tiles.begin(), d.declared_key_tiles.end(), [](std::int32_t t) { return t != 0; });
  const bool section_2_9 = p.flush_subnormals != 0;
  const bool section_2_7 =
      section_2_9 || !d.value_dims.empty() || d.value_dim.min || d.value_dim.max || d.alibi_excludes_bias || tiles;
  const bool cache =
      section_2_7 || d.cache_policy || d.cache_sinks || d.cache_recent || d.reports_retained || d.page_tokens;
  if (c.deterministic_backward || cache) w.i32(c.deterministic_backward);  // absent: 2.2 readers still load it
  if (cache) w.i32(d.cache_policy).i32(d.cache_sinks).i32(d.cache_recent).i32(d.reports_retained).i32(d.page_tokens);
  if (section_2_7) {  // absent: 2.4 to 2.6 readers still load it
    w.array(d.value_dims);
    write_range(w, d.value_dim);
    w.i32(d.alibi_excludes_bias);
    w.array(d.declared_key_tiles);
  }
  if (section_2_9) w.i32(p.flush_subnormals);  // absent: 2.7 and 2.8 readers still load it
}

inline Descriptor read_descriptor(Reader& r) {
  Descriptor d;
  attest_precision_spec& p = d.precision;
  attest_contract& c = d.contract;
  d.abi_version = r.u32();
  d.name = r.str();
  d.capabilities = r.u32();
  d.empty_rows = r.i32();
  read_precision_2_0(r, p);
  d.head_dims = r.array<std::int32_t>();
  for (attest_range* x : {&c.head_dim, &c.batch, &c.heads, &c.q_len, &c.k_len, &c.q_offset}) *x = read_range(r);
  c.dk_equals_dv = r.i32(), c.default_scale_only = r.i32(), c.causal_required = r.i32(), c.decode_only = r.i32();
  c.query_tile = r.i32(), c.key_tile = r.i32(), c.decode_lse_optional = r.i32();
  if (r.at_end()) return d;  // a 2.0 descriptor
  c.self_attention_only = r.i32(), c.alibi_slopes = r.i32(), c.inputs = r.i32(), c.alibi_max_bias = r.f64();
  c.max_abs_value = r.f64();
  read_precision_2_1(r, p);
  const std::uint32_t paths = r.u32();
  if (paths > 4096) throw ProtocolError("more than 4096 paths");
  for (std::uint32_t i = 0; i < paths; ++i) {
    PathPrecision path;
    path.path = r.str();
    read_precision_2_0(r, path.precision);
    read_precision_2_1(r, path.precision);
    d.paths.push_back(path);
  }
  if (r.at_end()) return d;  // a 2.1 descriptor
  const std::uint32_t declared = r.u32();
  if (declared > 4096) throw ProtocolError("more than 4096 declared paths");
  for (std::uint32_t i = 0; i < declared; ++i) {
    PathDeclaration path;
    attest_path_predicate& x = path.predicate;
    path.path = r.str();
    for (attest_range* range : {&x.batch, &x.heads, &x.q_len, &x.k_len, &x.head_dim, &x.value_dim})
      *range = read_range(r);
    x.head_dim_multiple = r.i32(), x.value_dim_multiple = r.i32(), x.k_len_multiple = r.i32();
    x.k_len_not_multiple = r.i32(), x.required = r.u32(), x.excluded = r.u32(), x.no_mask = r.i32();
    d.declared_paths.push_back(path);
  }
  if (r.at_end()) return d;  // a 2.2 descriptor
  c.deterministic_backward = r.i32();
  if (r.at_end()) return d;  // a 2.3 descriptor
  d.cache_policy = r.i32(), d.cache_sinks = r.i32(), d.cache_recent = r.i32(), d.reports_retained = r.i32();
  d.page_tokens = r.i32();
  if (r.at_end()) return d;  // a 2.4 to 2.6 descriptor
  d.value_dims = r.array<std::int32_t>();
  d.value_dim = read_range(r);
  d.alibi_excludes_bias = r.i32();
  d.declared_key_tiles = r.array<std::int32_t>();
  if (!d.declared_key_tiles.empty() && d.declared_key_tiles.size() != d.declared_paths.size())
    throw ProtocolError("declared_key_tiles has " + std::to_string(d.declared_key_tiles.size()) + " entries for " +
                        std::to_string(d.declared_paths.size()) + " declared paths");
  if (r.at_end()) return d;  // a 2.7 or 2.8 descriptor
  const std::int32_t flush = r.i32();
  if (flush < -128 || flush > 127) throw ProtocolError("flush_subnormals out of range");
  p.flush_subnormals = static_cast<std::int8_t>(flush);
  r.expect_end();
  return d;
}

// The integer mask terms travel as one i32 array in ATTEST_INTEGER_MASK_TERMS order, so that both
// sides may predate a term: a shorter array leaves the later terms 0 (off); a longer one is read
// as far as this build knows, and the rest must be 0 (attest sends a term only to a kernel that
// declares it, which a kernel built before the term cannot).
template <typename Header>
std::vector<std::int32_t> integer_terms(const Header& h) {
#define ATTEST_TERM_VALUE(name, cap) h.name,
  return {ATTEST_INTEGER_MASK_TERMS(ATTEST_TERM_VALUE)};
#undef ATTEST_TERM_VALUE
}

template <typename Header>
void read_integer_terms(Reader& r, Header& h) {
  const std::vector<std::int32_t> terms = r.array<std::int32_t>();
  std::size_t k = 0;
#define ATTEST_TERM_READ(name, cap) h.name = k < terms.size() ? terms[k] : 0, ++k;
  ATTEST_INTEGER_MASK_TERMS(ATTEST_TERM_READ)
#undef ATTEST_TERM_READ
  for (; k < terms.size(); ++k)
    if (terms[k] != 0) throw ProtocolError("an integer mask term this build does not know is set");
}

// A problem as it travels: the attest_problem_v2 fields, then its arrays. q, k and v are bytes
// in the kernel's storage types.
struct WireProblem {
  attest_problem_v2 header{};
  std::vector<std::int32_t> kv_valid, q_valid, q_segment, k_segment;
  std::vector<std::uint8_t> explicit_mask;
  std::vector<float> alibi_slopes, bias, sinks;
  std::vector<std::uint16_t> bias16;  // the bias of a kernel storing it in bf16 or f16 (then `bias` is empty)
  std::vector<std::uint8_t> q, k, v;

  // The C view; array pointers are NULL where the array is empty.
  attest_problem_v2 view() const {
    attest_problem_v2 p = header;
    auto or_null = [](const auto& v) { return v.empty() ? nullptr : v.data(); };
    p.kv_valid = or_null(kv_valid), p.q_valid = or_null(q_valid);
    p.q_segment = or_null(q_segment), p.k_segment = or_null(k_segment);
    p.explicit_mask = or_null(explicit_mask);
    p.alibi_slopes = or_null(alibi_slopes), p.bias = or_null(bias), p.sinks = or_null(sinks);
    p.bias_stored = bias.empty() ? static_cast<const void*>(or_null(bias16)) : bias.data();
    p.q = q.data(), p.k = k.data(), p.v = v.data();
    return p;
  }
};

inline void write_problem(Writer& w, const WireProblem& p) {
  const attest_problem_v2& h = p.header;
  w.i32(h.batch).i32(h.heads).i32(h.kv_heads).i32(h.q_len).i32(h.k_len).i32(h.head_dim).i32(h.value_dim);
  w.f64(h.scale).i64(h.q_offset).i32(h.causal).array(integer_terms(h)).i32(h.rope).f64(h.rope_base);
  w.array(p.kv_valid).array(p.q_valid).array(p.q_segment).array(p.k_segment).array(p.explicit_mask);
  w.f64(h.softcap).array(p.alibi_slopes);
  if (p.bias16.empty())
    w.array(p.bias);
  else
    w.array(p.bias16);
  w.i32(h.bias_per_batch).i32(h.bias_per_head).array(p.sinks);
  w.array(p.q).array(p.k).array(p.v);
}

// Reads a problem; q, k, v and the bias in the reader's storage types (attest_precision). Every
// array must agree with the shape before a kernel ever sees it.
inline WireProblem read_problem(Reader& r, std::int32_t q_type = ATTEST_F32, std::int32_t k_type = ATTEST_F32,
                                std::int32_t v_type = ATTEST_F32, std::int32_t bias_type = ATTEST_F32) {
  const std::size_t bias_bytes = storage_bytes(bias_type);
  WireProblem p;
  attest_problem_v2& h = p.header;
  h.batch = r.i32(), h.heads = r.i32(), h.kv_heads = r.i32(), h.q_len = r.i32();
  h.k_len = r.i32(), h.head_dim = r.i32(), h.value_dim = r.i32();
  h.scale = r.f64(), h.q_offset = r.i64(), h.causal = r.i32();
  read_integer_terms(r, h);
  h.rope = r.i32(), h.rope_base = r.f64();
  p.kv_valid = r.array<std::int32_t>(), p.q_valid = r.array<std::int32_t>();
  p.q_segment = r.array<std::int32_t>(), p.k_segment = r.array<std::int32_t>();
  p.explicit_mask = r.array<std::uint8_t>();
  h.softcap = r.f64();
  p.alibi_slopes = r.array<float>();
  if (bias_bytes == 4)
    p.bias = r.array<float>();
  else
    p.bias16 = r.array<std::uint16_t>();
  h.bias_per_batch = r.i32(), h.bias_per_head = r.i32();
  p.sinks = r.array<float>();
  p.q = r.array<std::uint8_t>(), p.k = r.array<std::uint8_t>(), p.v = r.array<std::uint8_t>();
  auto product = [](std::initializer_list<std::int64_t> dims) {
    std::int64_t n = 1;
    for (std::int64_t d : dims) {
      if (d < 1 || d > (std::int64_t{1} << 31)) throw ProtocolError("shape field out of range");
      n *= d;
      if (n > (std::int64_t{1} << 34)) throw ProtocolError("shape too large");
    }
    return static_cast<std::uint64_t>(n);
  };
  auto check = [](std::uint64_t actual, std::uint64_t expected, bool optional, const char* what) {
    if (actual != expected && !(optional && actual == 0))
      throw ProtocolError(std::string("array ") + what + " does not match the shape");
  };
  check(p.q.size(), stored_size(q_type, product({h.batch, h.heads, h.q_len}), product({h.head_dim})), false, "q");
  check(p.k.size(), stored_kv_size(k_type, product({h.batch, h.kv_heads}), product({h.k_len}), product({h.head_dim})),
        false, "k");
  check(p.v.size(), stored_kv_size(v_type, product({h.batch, h.kv_heads}), product({h.k_len}), product({h.value_dim})),
        false, "v");
  check(p.kv_valid.size(), product({h.batch}), true, "kv_valid");
  check(p.q_valid.size(), product({h.batch}), true, "q_valid");
  check(p.q_segment.size(), product({h.batch, h.q_len}), true, "q_segment");
  check(p.k_segment.size(), product({h.batch, h.k_len}), true, "k_segment");
  check(p.explicit_mask.size(), product({h.batch, h.q_len, h.k_len}), true, "explicit_mask");
  check(p.alibi_slopes.size(), product({h.heads}), true, "alibi_slopes");
  check(p.sinks.size(), product({h.heads}), true, "sinks");
  const std::uint64_t bias_size =
      product({h.bias_per_batch ? h.batch : 1, h.bias_per_head ? h.heads : 1, h.q_len, h.k_len});
  check(p.bias.size() + p.bias16.size(), bias_size, true, "bias");
  if (p.q_segment.empty() != p.k_segment.empty()) throw ProtocolError("q_segment and k_segment travel together");
  return p;
}

// A decode session's configuration as it travels.
struct WireDecodeConfig {
  attest_decode_config_v2 header{};
  std::vector<float> alibi_slopes, sinks;
  std::vector<float> k_scales, v_scales;  // ABI 2.4: q8_head's static scales, [B][Hkv] each, or empty
  attest_decode_config_v2 view() const {
    attest_decode_config_v2 c = header;
    c.alibi_slopes = alibi_slopes.empty() ? nullptr : alibi_slopes.data();
    c.sinks = sinks.empty() ? nullptr : sinks.data();
    c.reserved[0] = k_scales.empty() ? nullptr : k_scales.data();
    c.reserved[1] = v_scales.empty() ? nullptr : v_scales.data();
    return c;
  }
};

// `scales_follow`: the q8_head scale arrays are always written (a message where more follows the
// configuration: PAGE_BYTES, DECODE_PAGED); in DECODE_OPEN they end it, and only for q8_head.
inline void write_decode_config(Writer& w, const WireDecodeConfig& d, bool scales_follow = false) {
  const attest_decode_config_v2& c = d.header;
  w.i32(c.batch).i32(c.heads).i32(c.kv_heads).i32(c.head_dim).i32(c.value_dim).f64(c.scale);
  w.array(integer_terms(c)).i32(c.rope).f64(c.rope_base).f64(c.softcap).array(d.alibi_slopes).array(d.sinks);
  if (scales_follow || !d.k_scales.empty()) w.array(d.k_scales).array(d.v_scales);  // 2.4
}

inline WireDecodeConfig read_decode_config(Reader& r, bool scales_follow = false) {
  WireDecodeConfig d;
  attest_decode_config_v2& c = d.header;
  c.batch = r.i32(), c.heads = r.i32(), c.kv_heads = r.i32(), c.head_dim = r.i32(), c.value_dim = r.i32();
  c.scale = r.f64();
  read_integer_terms(r, c);
  c.rope = r.i32(), c.rope_base = r.f64();
  c.softcap = r.f64();
  d.alibi_slopes = r.array<float>(), d.sinks = r.array<float>();
  if (scales_follow || !r.at_end()) d.k_scales = r.array<float>(), d.v_scales = r.array<float>();
  for (std::int32_t x : {c.batch, c.heads, c.kv_heads, c.head_dim, c.value_dim})
    if (x < 1 || x > (1 << 30)) throw ProtocolError("decode configuration field out of range");
  const std::uint64_t heads = std::uint64_t(c.batch) * c.kv_heads;
  if ((!d.k_scales.empty() || !d.v_scales.empty()) && (d.k_scales.size() != heads || d.v_scales.size() != heads))
    throw ProtocolError("decode k_scales and v_scales must hold B x Hkv values each");
  if ((!d.alibi_slopes.empty() && d.alibi_slopes.size() != std::size_t(c.heads)) ||
      (!d.sinks.empty() && d.sinks.size() != std::size_t(c.heads)))
    throw ProtocolError("decode slopes or sinks do not match the heads");
  return d;
}

// A backward request (ABI 2.3): the problem, then the forward's outputs and the loss gradient.
// o and d_o are bytes in O's storage type.
struct WireBackward {
  WireProblem problem;
  std::int32_t threads = 0;  // attest_backward_inputs.threads
  std::vector<std::uint8_t> o, d_o;
  std::vector<float> lse;

  attest_backward_inputs view() const {
    attest_backward_inputs in{};
    in.o = o.data(), in.lse = lse.data(), in.d_o = d_o.data(), in.threads = threads;
    return in;
  }
};

inline void write_backward(Writer& w, const WireBackward& b) {
  write_problem(w, b.problem);
  w.i32(b.threads).array(b.o).array(b.lse).array(b.d_o);
}

// Reads a backward request; storage types as read_problem's, o_bytes per element of O and dO.
inline WireBackward read_backward(Reader& r, std::int32_t q_type, std::int32_t k_type, std::int32_t v_type,
                                  std::int32_t bias_type, std::size_t o_bytes) {
  WireBackward b;
  b.problem = read_problem(r, q_type, k_type, v_type, bias_type);
  b.threads = r.i32();
  b.o = r.array<std::uint8_t>(), b.lse = r.array<float>(), b.d_o = r.array<std::uint8_t>();
  r.expect_end();
  const attest_problem_v2& h = b.problem.header;
  const std::uint64_t rows = std::uint64_t(h.batch) * h.heads * h.q_len;  // each factor checked by read_problem
  if (b.threads < 0 || b.threads > 4096) throw ProtocolError("backward threads out of range");
  if (b.lse.size() != rows || b.o.size() / o_bytes / std::uint64_t(h.value_dim) != rows ||
      b.o.size() % (o_bytes * std::uint64_t(h.value_dim)) != 0 || b.d_o.size() != b.o.size())
    throw ProtocolError("backward arrays o, lse and d_o do not match the shape");
  return b;
}

// A merge request (ABI 2.6): partial states o [parts][rows][value_dim] as bytes in `storage` (f32
// or bf16) and lse [parts][rows].
struct WireMerge {
  std::int32_t parts = 0, rows = 0, value_dim = 0, storage = ATTEST_F32;
  std::vector<std::uint8_t> o;
  std::vector<float> lse;

  attest_merge_inputs view() const {
    attest_merge_inputs in{};
    in.parts = parts, in.rows = rows, in.value_dim = value_dim, in.storage = storage;
    in.o = o.data(), in.lse = lse.data();
    return in;
  }
};

inline void write_merge(Writer& w, const WireMerge& m) {
  w.i32(m.parts).i32(m.rows).i32(m.value_dim).i32(m.storage).array(m.o).array(m.lse);
}

inline WireMerge read_merge(Reader& r) {
  WireMerge m;
  m.parts = r.i32(), m.rows = r.i32(), m.value_dim = r.i32(), m.storage = r.i32();
  m.o = r.array<std::uint8_t>(), m.lse = r.array<float>();
  r.expect_end();
  if (m.parts < 1 || m.parts > 4096 || m.rows < 1 || m.rows > (1 << 30) || m.value_dim < 1 || m.value_dim > (1 << 30))
    throw ProtocolError("merge parts, rows or value_dim out of range");
  if (m.storage != ATTEST_F32 && m.storage != ATTEST_BF16) throw ProtocolError("merge storage is not f32 or bf16");
  const std::uint64_t rows = std::uint64_t(m.parts) * std::uint64_t(m.rows);  // < 2^43
  if (std::uint64_t(m.value_dim) > kMaxPayload / rows)  // the products below stay far inside 64 bits
    throw ProtocolError("merge of more values than a message holds");
  if (m.lse.size() != rows || m.o.size() != stored_size(m.storage, rows, std::uint64_t(m.value_dim)))
    throw ProtocolError("merge arrays o and lse do not match the shape");
  return m;
}

// A packed varlen forward (ABI 2.8): the call's terms (attest_packed_problem), its offsets and its
// float32 buffers; view() points the header at them.
struct WirePacked {
  attest_packed_problem header{};
  std::vector<float> alibi_slopes, sinks;
  std::vector<std::int32_t> cu_seqlens_q, cu_seqlens_k;
  std::vector<float> q, k, v;
  std::int32_t want_lse = 0;

  attest_packed_problem view() const {
    attest_packed_problem h = header;
    h.alibi_slopes = alibi_slopes.empty() ? nullptr : alibi_slopes.data();
    h.sinks = sinks.empty() ? nullptr : sinks.data();
    h.cu_seqlens_q = cu_seqlens_q.data(), h.cu_seqlens_k = cu_seqlens_k.data();
    h.q = q.empty() ? nullptr : q.data(), h.k = k.empty() ? nullptr : k.data(), h.v = v.empty() ? nullptr : v.data();
    return h;
  }
  std::uint64_t total_q() const { return cu_seqlens_q.empty() ? 0 : std::uint64_t(cu_seqlens_q.back()); }
};

inline void write_packed(Writer& w, const WirePacked& p) {
  const attest_packed_problem& h = p.header;
  w.i32(h.batch).i32(h.heads).i32(h.kv_heads).i32(h.head_dim).i32(h.value_dim).i32(h.max_seqlen_q).i32(h.max_seqlen_k);
  w.f64(h.scale).i64(h.q_offset).i32(h.causal).i32(h.window).i32(h.chunk).i32(h.lookahead).i32(h.rope);
  w.f64(h.rope_base).f64(h.softcap).array(p.alibi_slopes).array(p.sinks).array(p.cu_seqlens_q).array(p.cu_seqlens_k);
  w.array(p.q).array(p.k).array(p.v).i32(p.want_lse);
}

inline WirePacked read_packed(Reader& r) {
  WirePacked p;
  attest_packed_problem& h = p.header;
  h.batch = r.i32(), h.heads = r.i32(), h.kv_heads = r.i32(), h.head_dim = r.i32(), h.value_dim = r.i32();
  h.max_seqlen_q = r.i32(), h.max_seqlen_k = r.i32();
  h.scale = r.f64(), h.q_offset = r.i64(), h.causal = r.i32(), h.window = r.i32(), h.chunk = r.i32();
  h.lookahead = r.i32(), h.rope = r.i32(), h.rope_base = r.f64(), h.softcap = r.f64();
  p.alibi_slopes = r.array<float>(), p.sinks = r.array<float>();
  p.cu_seqlens_q = r.array<std::int32_t>(), p.cu_seqlens_k = r.array<std::int32_t>();
  p.q = r.array<float>(), p.k = r.array<float>(), p.v = r.array<float>();
  p.want_lse = r.i32();
  r.expect_end();
  constexpr std::int32_t kMax = 1 << 20;
  if (h.batch < 1 || h.batch > kMax || h.heads < 1 || h.heads > kMax || h.kv_heads < 1 || h.kv_heads > h.heads ||
      h.head_dim < 1 || h.head_dim > kMax || h.value_dim < 1 || h.value_dim > kMax)
    throw ProtocolError("packed batch, heads or widths out of range");
  if (p.cu_seqlens_q.size() != std::size_t(h.batch) + 1 || p.cu_seqlens_k.size() != std::size_t(h.batch) + 1)
    throw ProtocolError("packed cu_seqlens do not hold batch + 1 offsets");
  for (const auto* cu : {&p.cu_seqlens_q, &p.cu_seqlens_k})
    for (std::size_t b = 0; b < cu->size(); ++b)
      if ((*cu)[b] < (b == 0 ? 0 : (*cu)[b - 1]) || (b == 0 && (*cu)[0] != 0))
        throw ProtocolError("packed cu_seqlens do not start at 0 or decrease");
  const std::uint64_t tq = p.total_q(), tk = std::uint64_t(p.cu_seqlens_k.back());
  if ((!p.alibi_slopes.empty() && p.alibi_slopes.size() != std::size_t(h.heads)) ||
      (!p.sinks.empty() && p.sinks.size() != std::size_t(h.heads)) ||
      p.q.size() != tq * std::uint64_t(h.heads) * std::uint64_t(h.head_dim) ||
      p.k.size() != tk * std::uint64_t(h.kv_heads) * std::uint64_t(h.head_dim) ||
      p.v.size() != tk * std::uint64_t(h.kv_heads) * std::uint64_t(h.value_dim))
    throw ProtocolError("packed arrays do not match cu_seqlens and the shape");
  return p;
}

// The kernel's replies as attest reads them (each throws ProtocolError when malformed).
struct ForwardResult {
  std::int32_t status = 0;
  std::string error, path, fault;
  std::vector<std::uint8_t> o;  // in the O storage type
  std::vector<float> lse;
};

inline ForwardResult read_forward_result(Reader& r) {
  ForwardResult f;
  f.status = r.i32();
  f.error = r.str(), f.path = r.str(), f.fault = r.str();
  f.o = r.array<std::uint8_t>(), f.lse = r.array<float>();
  r.expect_end();
  return f;
}

struct BackwardResult {
  std::int32_t status = 0;
  std::string error, path, fault;
  std::vector<std::uint8_t> dq, dk, dv;  // in the storage types of q, k and v
  std::vector<float> dsinks;
};

inline BackwardResult read_backward_result(Reader& r) {
  BackwardResult b;
  b.status = r.i32();
  b.error = r.str(), b.path = r.str(), b.fault = r.str();
  b.dq = r.array<std::uint8_t>(), b.dk = r.array<std::uint8_t>(), b.dv = r.array<std::uint8_t>();
  b.dsinks = r.array<float>();
  r.expect_end();
  return b;
}

struct MergeResult {
  std::int32_t status = 0;
  std::string error, path, fault;
  std::vector<float> o, lse;  // float32: [rows][value_dim] and [rows]
};

inline MergeResult read_merge_result(Reader& r) {
  MergeResult m;
  m.status = r.i32();
  m.error = r.str(), m.path = r.str(), m.fault = r.str();
  m.o = r.array<float>(), m.lse = r.array<float>();
  r.expect_end();
  return m;
}

struct PackedResult {
  std::int32_t status = 0;
  std::string error, path, fault;
  std::vector<float> o, lse;  // float32: [total_q][H][Dv] and [H][total_q]
};

inline PackedResult read_packed_result(Reader& r) {
  PackedResult m;
  m.status = r.i32();
  m.error = r.str(), m.path = r.str(), m.fault = r.str();
  m.o = r.array<float>(), m.lse = r.array<float>();
  r.expect_end();
  return m;
}

struct DecodeResult {
  std::int32_t status = 0;
  std::string error, path;
  std::vector<std::uint8_t> o;
  std::vector<float> lse;
};

inline DecodeResult read_decode_result(Reader& r) {
  DecodeResult d;
  d.status = r.i32();
  d.error = r.str(), d.path = r.str();
  d.o = r.array<std::uint8_t>(), d.lse = r.array<float>();
  r.expect_end();
  return d;
}

// ABI 2.4: one block-table call as it travels (after its decode config): the pool whole (the kernel
// writes its new tokens' slots), the tables, lengths and counts, and the new tokens packed sequence
// after sequence in their storage types. The pool is a view: a sender's own pages, or the bytes of
// the message it was read from (at up to a GiB, each copy counts).
struct WirePagedStep {
  std::int64_t page_bytes = 0;
  std::span<const std::uint8_t> pool;
  std::int32_t table_width = 0;
  std::vector<std::int32_t> tables, counts;
  std::vector<std::int64_t> lengths;
  std::int32_t want_lse = 0;
  std::vector<std::uint8_t> q, k, v;
};

// A step's message is head, the pool's bytes, tail: a sender may write the pool from where it lives.
inline void write_paged_step_head(Writer& w, const WirePagedStep& s) { w.i64(s.page_bytes).u64(s.pool.size()); }
inline void write_paged_step_tail(Writer& w, const WirePagedStep& s) {
  w.i32(s.table_width).array(s.tables).array(s.lengths).array(s.counts);
  w.i32(s.want_lse).array(s.q).array(s.k).array(s.v);
}
inline void write_paged_step(Writer& w, const WirePagedStep& s) {
  write_paged_step_head(w, s);
  w.append(s.pool);
  write_paged_step_tail(w, s);
}

// Reads a step of a session configured as `c`, checking every array against it: the pool whole
// pages, every table entry a sequence uses inside the pool, the tokens' buffers the counts' sizes.
// Its pool is a view into the message `r` reads.
inline WirePagedStep read_paged_step(Reader& r, const attest_decode_config_v2& c, std::int32_t page_tokens,
                                     std::int32_t q_type, std::int32_t k_type, std::int32_t v_type) {
  WirePagedStep s;
  s.page_bytes = r.i64();
  s.pool = r.byte_view();
  s.table_width = r.i32();
  s.tables = r.array<std::int32_t>(), s.lengths = r.array<std::int64_t>(), s.counts = r.array<std::int32_t>();
  s.want_lse = r.i32();
  s.q = r.array<std::uint8_t>(), s.k = r.array<std::uint8_t>(), s.v = r.array<std::uint8_t>();
  r.expect_end();
  const std::uint64_t batch = c.batch;
  if (page_tokens < 1 || s.page_bytes < 1 || s.pool.size() % std::uint64_t(s.page_bytes) != 0)
    throw ProtocolError("paged step: the pool is not a whole number of pages");
  if (s.table_width < 0 || s.tables.size() != batch * std::uint64_t(s.table_width) || s.lengths.size() != batch ||
      s.counts.size() != batch)
    throw ProtocolError("paged step: tables, lengths and counts do not match the batch");
  const std::int64_t pages = static_cast<std::int64_t>(s.pool.size() / std::uint64_t(s.page_bytes));
  std::uint64_t tokens = 0;
  for (std::uint64_t b = 0; b < batch; ++b) {
    // Positions fit an int32 (kernels index them so); the tokens of one call stay far below 2^31.
    if (s.lengths[b] < 0 || s.counts[b] < 0 || s.lengths[b] + s.counts[b] > INT32_MAX ||
        tokens + std::uint64_t(s.counts[b]) > (std::uint64_t{1} << 31))
      throw ProtocolError("paged step: sequence " + std::to_string(b) + "'s length or count is out of range");
    const std::int64_t used = (s.lengths[b] + s.counts[b] + page_tokens - 1) / page_tokens;
    if (used > s.table_width) throw ProtocolError("paged step: a table narrower than its sequence");
    for (std::int64_t e = 0; e < used; ++e)
      if (s.tables[b * s.table_width + e] < 0 || s.tables[b * s.table_width + e] >= pages)
        throw ProtocolError("paged step: a table names a page outside the pool");
    tokens += std::uint64_t(s.counts[b]);
  }
  // tokens <= 2^31 and heads, widths <= 2^30 (read_decode_config): these products fit in 64 bits.
  if (s.q.size() != stored_size(q_type, tokens * c.heads, c.head_dim) ||
      s.k.size() != stored_size(k_type, tokens * c.kv_heads, c.head_dim) ||
      s.v.size() != stored_size(v_type, tokens * c.kv_heads, c.value_dim))
    throw ProtocolError("paged step: q, k or v does not match the counts and the configuration");
  return s;
}

struct PagedResult {
  std::int32_t status = 0;
  std::string error, path, fault;
  std::span<const std::uint8_t> pool;  // a view into the reply read
  std::vector<std::uint8_t> o;
  std::vector<float> lse;
};

// Its pool is a view into the message `r` reads.
inline PagedResult read_paged_result(Reader& r) {
  PagedResult p;
  p.status = r.i32();
  p.error = r.str(), p.path = r.str(), p.fault = r.str();
  p.pool = r.byte_view(), p.o = r.array<std::uint8_t>(), p.lse = r.array<float>();
  r.expect_end();
  return p;
}

// ABI 2.4: the positions query t of a session's last step attended in sequence b.
struct Retained {
  std::int32_t status = 0;
  std::string error;
  std::vector<std::int64_t> positions;
};

inline Retained read_retained(Reader& r) {
  Retained d;
  d.status = r.i32();
  d.error = r.str();
  d.positions = r.array<std::int64_t>();
  r.expect_end();
  return d;
}

struct DecodeOpened {
  std::int32_t status = 0;
  std::string error;
  std::uint64_t session = 0;
};

inline DecodeOpened read_decode_opened(Reader& r) {
  DecodeOpened d;
  d.status = r.i32();
  d.error = r.str();
  d.session = r.u64();
  r.expect_end();
  return d;
}

}  // namespace attest::protocol
