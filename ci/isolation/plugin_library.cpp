#include "plugin_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "attest/abi/abi_adapter.h"
#include "attest/properties/safe_text.h"
#include "process_kernel.h"

namespace attest {

const void* open_plugin(const std::string& path) {
  if (!std::filesystem::exists(path)) throw KernelLoadError("no such file: " + path);
  void* library = ::dlopen(std::filesystem::absolute(path).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) throw KernelLoadError(fmt::format("cannot load {}: {}", path, ::dlerror()));
  auto entry = reinterpret_cast<attest_kernel_entry_any_fn>(::dlsym(library, ATTEST_ENTRY_SYMBOL));
  if (!entry) throw KernelLoadError(fmt::format("{} does not export {}", path, ATTEST_ENTRY_SYMBOL));
  const void* descriptor = entry();
  if (!descriptor) throw KernelLoadError(fmt::format("{}: {}() returned NULL", path, ATTEST_ENTRY_SYMBOL));
  const std::uint32_t version = *static_cast<const std::uint32_t*>(descriptor);
  if (version == ATTEST_ABI_VERSION_1) {
    if (!static_cast<const attest_kernel*>(descriptor)->forward)
      throw KernelLoadError(fmt::format("{}: descriptor has no forward function", path));
  } else if (version == ATTEST_ABI_VERSION_2) {
    const auto* v2 = static_cast<const attest_kernel_v2*>(descriptor);
    if (v2->struct_size < ATTEST_KERNEL_V2_0_SIZE)  // a 2.0 descriptor ends before 2.1's paths
      throw KernelLoadError(fmt::format("{}: descriptor struct_size {} is smaller than attest_kernel_v2 ({})", path,
                                        v2->struct_size, ATTEST_KERNEL_V2_0_SIZE));
    if (!v2->forward && !v2->contract.decode_only)
      throw KernelLoadError(
          fmt::format("{}: descriptor has no forward function (and its contract is not decode_only)", path));
    if ((v2->capabilities & ATTEST_CAP_BACKWARD) && !v2->backward)
      throw KernelLoadError(fmt::format("{}: descriptor declares ATTEST_CAP_BACKWARD but its backward is NULL", path));
    if ((v2->capabilities & ATTEST_CAP_MERGE) && !v2->merge)
      throw KernelLoadError(fmt::format("{}: descriptor declares ATTEST_CAP_MERGE but its merge is NULL", path));
    if ((v2->capabilities & ATTEST_CAP_PACKED) && (v2->struct_size < ATTEST_KERNEL_V2_8_SIZE || !v2->forward_packed))
      throw KernelLoadError(fmt::format(
          "{}: descriptor declares ATTEST_CAP_PACKED but its forward_packed is NULL or past struct_size", path));
  } else {
    throw KernelLoadError(fmt::format("{}: kernel ABI version {}, this attest speaks versions 1 and 2", path, version));
  }
  return descriptor;
}

namespace {

[[noreturn]] void status_failure(const char* call, attest_status status, const protocol::ServedKernel& served) {
  throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("{} returned status {}: {}", call, int(status),
                                                                safe_text(served.last_error(), kMaxKernelMessage)));
}

// A path the kernel wrote, as text ("": none written).
std::string reported_path(const char (&path)[32]) {
  return safe_text(std::string(path, ::strnlen(path, sizeof path)), kMaxKernelName);
}

std::string path_of(const char (&path)[32]) {
  const std::string p = reported_path(path);
  return p.empty() ? "default" : p;
}

// Values into O's storage format and back; f32 buffers are used as they are.
void copy_out(const std::vector<std::uint8_t>& bytes, Scalar format, std::span<float> o) {
  const std::vector<float> values = floats_from_storage(bytes.data(), o.size(), format);
  std::copy(values.begin(), values.end(), o.begin());
}

}  // namespace

InProcessPlugin::InProcessPlugin(const std::string& path) : served_(open_plugin(path)) {
  const protocol::Descriptor d = served_.descriptor();
  try {
    caps_ = capabilities_from_descriptor(d);
  } catch (const std::invalid_argument& e) {
    throw KernelLoadError(path + ": " + e.what());
  }
  name_ = safe_text(d.name, kMaxKernelName);
  if (name_.empty()) name_ = safe_text(path, kMaxKernelName);
}

InProcessPlugin::Prepared InProcessPlugin::prepare(const Problem& p) const {
  if (!caps_.forward()) throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel is decode-only (no forward)");
  Prepared call;
  call.kernel_ = this;
  call.wire_ = to_wire(p, caps_.precision);
  call.view_ = call.wire_.view();
  call.o_.assign(p.o_size() * info(caps_.precision.o).bytes, 0);
  if (caps_.lse()) call.lse_.assign(p.lse_size(), 0.0f);
  return call;
}

void InProcessPlugin::Prepared::operator()() {
  attest_outputs_v2 out{};
  out.o = o_.data();
  out.lse = lse_.empty() ? nullptr : lse_.data();
  const attest_status status = kernel_->served_.forward(view_, out);
  if (status != ATTEST_OK) status_failure("kernel", status, kernel_->served_);
  kernel_->last_path_ = path_of(out.path);
}

void InProcessPlugin::forward(const Problem& p, std::span<float> o, std::span<float> lse) const {
  Prepared call = prepare(p);
  call();
  copy_out(call.o_, caps_.precision.o, o);
  if (!lse.empty() && !call.lse_.empty()) std::copy(call.lse_.begin(), call.lse_.end(), lse.begin());
}

void InProcessPlugin::backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const {
  const protocol::WireBackward wire = to_wire(p, in, caps_.precision);
  const attest_problem_v2 problem = wire.problem.view();
  const attest_backward_inputs inputs = wire.view();
  const Precision& precision = caps_.precision;
  std::vector<std::uint8_t> dq(p.q_size() * info(precision.q).bytes), dk(p.k_size() * info(precision.k).bytes),
      dv(p.v_size() * info(precision.v).bytes);
  std::vector<float> dsinks(p.modifiers.sinks.size());
  // NaN-filled as the kernel host's are: a gradient never written shows (a backward is float32).
  for (std::vector<std::uint8_t>* bytes : {&dq, &dk, &dv})
    protocol::detail::fill_nan(bytes->data(), bytes->size(), ATTEST_F32);
  protocol::detail::fill_nan(dsinks.data(), dsinks.size() * sizeof(float), ATTEST_F32);
  attest_gradients gradients{};
  gradients.dq = dq.data(), gradients.dk = dk.data(), gradients.dv = dv.data();
  gradients.dsinks = dsinks.empty() ? nullptr : dsinks.data();
  last_backward_path_.clear();
  const attest_status status = served_.backward(problem, inputs, gradients);
  if (status != ATTEST_OK) status_failure("backward", status, served_);
  last_backward_path_ = reported_path(gradients.path);
  if (!gradients_from_storage(dq, dk, dv, dsinks, precision, out))
    throw KernelFailure(KernelFailure::Kind::kProtocol, "the gradients do not have the problem's sizes");
}

void InProcessPlugin::merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const {
  const protocol::WireMerge wire = to_wire(in);
  std::fill(o.begin(), o.end(), std::numeric_limits<float>::quiet_NaN());  // a value never written shows
  std::fill(lse.begin(), lse.end(), std::numeric_limits<float>::quiet_NaN());
  attest_merge_outputs out{};
  out.o = o.data(), out.lse = lse.data();
  const attest_status status = served_.merge(wire.view(), out);
  if (status != ATTEST_OK) status_failure("merge", status, served_);
}

namespace {

// Offsets in the width T the kernel reads, flush against a trailing guard page: a kernel reading
// entry batch + 1 faults.
template <typename T>
std::unique_ptr<guarded::Buffer> guarded_offsets(const char* name, const std::vector<std::int32_t>& offsets) {
  const std::vector<T> values(offsets.begin(), offsets.end());
  auto b = std::make_unique<guarded::Buffer>(name, values.size() * sizeof(T), guarded::Placement::kEnd);
  std::memcpy(b->data(), values.data(), values.size() * sizeof(T));
  b->seal();
  return b;
}

}  // namespace

void InProcessPlugin::forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const {
  attest_packed_problem problem = packed_problem_view(call, nullptr, nullptr);
  std::unique_ptr<guarded::Buffer> cu_q, cu_k;
  if (caps_.packed_int64) {  // ABI 2.10: int64 offsets, the int32 pointers NULL
    cu_q = guarded_offsets<std::int64_t>("cu_seqlens_q64", call.cu_seqlens_q);
    cu_k = guarded_offsets<std::int64_t>("cu_seqlens_k64", call.cu_seqlens_k);
    problem.cu_seqlens_q64 = static_cast<const std::int64_t*>(cu_q->data());
    problem.cu_seqlens_k64 = static_cast<const std::int64_t*>(cu_k->data());
  } else {
    cu_q = guarded_offsets<std::int32_t>("cu_seqlens_q", call.cu_seqlens_q);
    cu_k = guarded_offsets<std::int32_t>("cu_seqlens_k", call.cu_seqlens_k);
    problem.cu_seqlens_q = static_cast<const std::int32_t*>(cu_q->data());
    problem.cu_seqlens_k = static_cast<const std::int32_t*>(cu_k->data());
  }
  std::fill(o.begin(), o.end(), std::numeric_limits<float>::quiet_NaN());  // a value never written shows
  std::fill(lse.begin(), lse.end(), std::numeric_limits<float>::quiet_NaN());
  attest_packed_outputs out{};
  out.o = o.data(), out.lse = lse.empty() ? nullptr : lse.data();
  last_packed_path_.clear();  // a call that fails reported nothing
  const attest_status status = served_.forward_packed(problem, out);
  if (status != ATTEST_OK) status_failure("forward_packed", status, served_);
  last_packed_path_ = reported_path(out.path);
}

class InProcessDecode final : public DecodeSession {
 public:
  InProcessDecode(const InProcessPlugin& kernel, const DecodeConfig& config) : kernel_(kernel), config_(config) {
    const protocol::WireDecodeConfig wire = to_wire(config);
    const attest_status status = kernel_.served_.decode_open(wire.view(), &handle_);
    if (status != ATTEST_OK) status_failure("decode open", status, kernel_.served_);
  }
  ~InProcessDecode() override { kernel_.served_.decode_close(handle_); }

  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
            std::span<float> lse) override {
    const Precision& precision = kernel_.caps_.precision;
    const StoredStep bytes = stored_step(config_, precision, n, q, k, v);
    std::vector<std::uint8_t> os(o.size() * info(precision.o).bytes);
    protocol::detail::fill_nan(os.data(), os.size(), abi_code(precision.o));  // an unwritten output shows
    char path[32] = {};
    const attest_status status = kernel_.served_.decode_step(handle_, n, bytes.q.data(), bytes.k.data(), bytes.v.data(),
                                                             os.data(), lse.empty() ? nullptr : lse.data(), path);
    if (status != ATTEST_OK) status_failure("decode step", status, kernel_.served_);
    copy_out(os, precision.o, o);
    kernel_.last_path_ = path_of(path);  // a failing decode check names the session's path
    length_ += n;
  }
  long long length() const override { return length_; }
  std::size_t cache_bytes() const override { return 0; }  // the plugin does not report it
  std::vector<long long> retained_positions(int b, int t) const override {
    if (kernel_.caps_.cache.kind != CachePolicy::Kind::kExplicit) return {};
    std::vector<std::int64_t> positions(static_cast<std::size_t>(length_ + 1));
    std::int32_t count = 0;
    const attest_status status =
        kernel_.served_.retained(handle_, b, t, positions.data(), static_cast<std::int32_t>(positions.size()), &count);
    if (status != ATTEST_OK) status_failure("decode_retained", status, kernel_.served_);
    if (count < 0 || std::size_t(count) > positions.size())
      throw KernelFailure(KernelFailure::Kind::kProtocol, fmt::format("decode_retained reported {} positions", count));
    return {positions.begin(), positions.begin() + count};
  }

 private:
  const InProcessPlugin& kernel_;
  DecodeConfig config_;
  void* handle_ = nullptr;
  long long length_ = 0;
};

std::unique_ptr<DecodeSession> InProcessPlugin::open_decode(const DecodeConfig& config) const {
  config.validate();
  if (!served_.decodes())
    throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel does not decode (no decode functions)");
  return std::make_unique<InProcessDecode>(*this, config);
}

}  // namespace attest

namespace attest {

std::size_t InProcessPlugin::page_bytes(const DecodeConfig& config) const {
  if (caps_.page_tokens < 1) throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel declares no block tables");
  const protocol::WireDecodeConfig wire = to_wire(config);
  std::int64_t bytes = 0;
  const attest_status status = served_.page_bytes(wire.view(), &bytes);
  if (status != ATTEST_OK) status_failure("page_bytes", status, served_);
  if (bytes < 1 || bytes > (std::int64_t{1} << 30))
    throw KernelFailure(KernelFailure::Kind::kProtocol, fmt::format("page_bytes returned {} bytes (1 to 2^30)", bytes));
  protocol::Writer key;
  protocol::write_decode_config(key, wire, true);
  return page_sizes_.checked(key.bytes(), static_cast<std::size_t>(bytes));
}

void InProcessPlugin::decode_paged(const DecodeConfig& config, const PagedStep& step) const {
  check_paged_step(config, caps_.page_tokens, page_bytes(config), step);
  const protocol::WireDecodeConfig wire = to_wire(config);
  const StoredStep bytes = stored_paged(config, caps_.precision, step.counts, step.q, step.k, step.v);
  std::vector<std::uint8_t> o(step.o.size() * info(caps_.precision.o).bytes);
  protocol::detail::fill_nan(o.data(), o.size(), abi_code(caps_.precision.o));  // an unwritten output shows
  attest_paged_step call{};
  call.pool = step.pool.data(), call.pool_bytes = static_cast<std::int64_t>(step.pool.size());
  call.tables = step.tables.data(), call.table_width = step.table_width;
  call.lengths = step.lengths.data(), call.counts = step.counts.data();
  call.q = bytes.q.data(), call.k = bytes.k.data(), call.v = bytes.v.data(), call.o = o.data();
  call.lse = step.lse.empty() ? nullptr : step.lse.data();
  const attest_status status = served_.decode_paged(wire.view(), call);
  if (status != ATTEST_OK) status_failure("decode_paged", status, served_);
  copy_out(o, caps_.precision.o, step.o);
  last_path_ = path_of(call.path);
}

}  // namespace attest
