// The protocol client of a kernel in a child process: the handshake, each call's request and
// reply within its limit, and what a failed call means. The child's containment is containment.cpp.
#include "process_kernel.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attest/abi/abi_adapter.h"
#include "attest/properties/safe_text.h"

namespace attest {
namespace {

using Clock = std::chrono::steady_clock;
using protocol::Type;

std::string seconds_text(double s) { return fmt::format("{:g} s", s); }

// The least a kernel process gets to start and describe itself, whatever --timeout says.
constexpr double kStartSeconds = 30.0;

// Bytes a reply may need: its strings (each capped) and its float arrays.
std::uint64_t reply_bound(std::size_t strings, std::uint64_t floats) {
  return 64 + strings * (4 + kMaxKernelString) + 4 * floats;
}

std::string& kernel_host_executable() {
  static std::string path;  // empty: this executable
  return path;
}

}  // namespace

void set_kernel_host_executable(const std::string& path) { kernel_host_executable() = path; }

std::vector<std::string> kernel_host_argv(const std::vector<std::string>& args) {
  std::string host = kernel_host_executable();
  if (host.empty()) {
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) throw KernelLoadError("cannot find the attest executable (/proc/self/exe)");
    self[n] = '\0';
    host = self;
  }
  std::vector<std::string> argv = {host, "kernel-host"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

ProcessKernel::ProcessKernel(Options options) : options_(std::move(options)) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead child must give EPIPE, not kill the harness
  start();
}

ProcessKernel::~ProcessKernel() { stop(); }

void ProcessKernel::start() const {
  const Containment& c = options_.containment;
  if (c.deadline && Clock::now() >= *c.deadline)
    throw KernelFailure(KernelFailure::Kind::kDeadline, "the whole-run deadline was reached");
  child_ = start_contained(options_.argv, options_.serve_in_child, c.memory_limit_bytes);
  ++generation_;

  // Handshake: HELLO, then the descriptor (or an error naming why the kernel cannot serve).
  std::string reply;
  try {
    reply = call(Type::kHello, protocol::Writer().u32(protocol::kVersion).bytes(), Type::kDescriptor,
                 protocol::kMaxDescriptorBytes);
  } catch (const KernelFailure& e) {
    stop();
    throw KernelLoadError(options_.description + ": " + e.what() + " before describing itself (protocol " +
                          std::to_string(protocol::kVersion) +
                          ": requests and replies travel on the descriptors of ATTEST_PROTOCOL_FDS; impl/PROTOCOL.md)");
  }
  protocol::Reader r(reply);
  try {
    const protocol::Descriptor d = protocol::read_descriptor(r);
    const std::string name = safe_text(d.name, kMaxKernelName);
    if (d.abi_version != ATTEST_ABI_VERSION_1 && d.abi_version != ATTEST_ABI_VERSION_2)
      throw KernelLoadError(fmt::format("{}: kernel ABI version {}, this attest speaks versions 1 and 2",
                                        options_.description, d.abi_version));
    auto* self = const_cast<ProcessKernel*>(this);
    if (self->name_.empty()) {
      try {
        self->caps_ = capabilities_from_descriptor(d);
      } catch (const std::invalid_argument& e) {
        throw KernelLoadError(options_.description + ": " + e.what());
      }
      self->abi_version_ = d.abi_version;
      self->name_ = name.empty() ? safe_text(options_.description, kMaxKernelName) : name;
    }
  } catch (const protocol::ProtocolError& e) {
    stop();
    throw KernelLoadError(options_.description + ": malformed descriptor: " + e.what());
  } catch (const KernelLoadError&) {
    stop();
    throw;
  }
}

void ProcessKernel::stop() const {
  if (child_.pid < 0) return;
  protocol::write_frame(child_.to_child, Type::kBye, "");
  end_contained(child_, 50);
}

void ProcessKernel::kill_child() const { end_contained(child_, 0); }

void ProcessKernel::fail(KernelFailure::Kind kind, const std::string& why) const {
  kill_child();
  throw KernelFailure(kind, why);
}

// What one call may take, fixed when it starts: writing the request and reading the reply share
// it, so a call never lasts longer than its limit (a kernel that reads slowly then stalls once
// had its whole limit twice).
struct ProcessKernel::CallLimit {
  enum class Kind { kHang, kDeadline, kCutoff };
  Clock::time_point start, deadline;
  Kind kind = Kind::kHang;
  double hang_after = 0;           // seconds from start
  std::optional<double> measured;  // what the kernel's measured speed predicts
  double predicted = 0;            // measured, or the floor for calls too fast to time
};

ProcessKernel::CallLimit ProcessKernel::limit_of(Type reply, double work) const {
  const Containment& c = options_.containment;
  CallLimit l;
  l.start = Clock::now();
  // A hang is no answer within max(--timeout, kHangFactor x the call's predicted cost), budget or
  // not. Every call has a prediction: from the kernel's measured speed, or, before any call was
  // slow enough to time, from the floor (cost_model.h). The stage's time budget may end the wait
  // sooner only while a measured prediction still explains it (a live kernel merely slow at this
  // size): a cutoff that comes after kHangFactor x the prediction, or a call whose prediction is
  // only the floor, never cuts, and the call runs on to the hang limit.
  l.measured = work > 0 ? costs_.predict(work) : std::nullopt;
  l.predicted = costs_.predict_or_floor(work);
  // Starting a program (an interpreter, a sanitized host on a busy machine) is not the kernel's
  // computation: the handshake waits at least kStartSeconds, and no budget cuts it.
  const bool handshake = reply == Type::kDescriptor;
  const double floor = handshake ? std::max(c.timeout_seconds, kStartSeconds) : c.timeout_seconds;
  l.hang_after = std::max(floor, kHangFactor * l.predicted);
  auto after = [&](double seconds) {
    return l.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  l.deadline = after(l.hang_after);
  const bool explained = l.measured && cutoff_ && *cutoff_ < after(kHangFactor * *l.measured);
  if (cutoff_ && !handshake && explained && *cutoff_ < l.deadline)
    l.deadline = *cutoff_, l.kind = CallLimit::Kind::kCutoff;
  if (c.deadline && *c.deadline < l.deadline) l.deadline = *c.deadline, l.kind = CallLimit::Kind::kDeadline;
  return l;
}

void ProcessKernel::fail_at_limit(const CallLimit& l, std::optional<std::size_t> unsent_request) const {
  const double waited = std::chrono::duration<double>(Clock::now() - l.start).count();
  if (l.kind == CallLimit::Kind::kDeadline)
    fail(KernelFailure::Kind::kDeadline, "the whole-run deadline was reached during a call (kernel killed)");
  if (l.kind == CallLimit::Kind::kCutoff)
    fail(KernelFailure::Kind::kTooSlow,
         fmt::format("still {} after {:.3g} s when the time budget ran out; its measured speed predicts {:.3g} s "
                     "(killed)",
                     unsent_request ? "taking its request" : "computing", waited, *l.measured));
  if (unsent_request)
    fail(KernelFailure::Kind::kHang, fmt::format("kernel stopped reading: a request of {} bytes not taken within {} "
                                                 "(killed)",
                                                 *unsent_request, seconds_text(l.hang_after)));
  // A fork carries only the thread that forked: a kernel waiting on a pool it started earlier hangs.
  const std::string forked = options_.serve_in_child
                                 ? "; it ran in a fork of the calling process, which keeps only the calling thread: "
                                   "a kernel waiting on threads it started before certify hangs there (start them on "
                                   "first use, give certify a KernelFactory that builds the kernel in the child, or "
                                   "certify with in_process = true)"
                                 : "";
  fail(KernelFailure::Kind::kHang,
       fmt::format("kernel did not answer within {}, {:.3g}x what {} predicts ({:.3g} s) (killed){}",
                   seconds_text(l.hang_after), waited / l.predicted,
                   l.measured ? "its measured speed" : "the floor for a call too fast to time", l.predicted, forked));
}

std::string ProcessKernel::read_reply(Type expected, std::uint64_t max_payload, double work,
                                      const CallLimit& limit) const {
  auto fail_read = [&](ReadResult r) {
    if (r == ReadResult::kEof || r == ReadResult::kDied) {
      const int status = end_contained(child_, 500);  // it closed its end: give it a moment to finish dying
      throw KernelFailure(KernelFailure::Kind::kCrash,
                          fmt::format("kernel process {} while answering", describe_exit(status)));
    }
    fail_at_limit(limit, std::nullopt);
  };
  char header[16];
  if (ReadResult r =
          read_with_deadline(child_.from_child, child_.pidfd, child_.pid, header, sizeof header, limit.deadline);
      r != ReadResult::kOk)
    fail_read(r);
  Type type;
  std::uint64_t size;
  try {
    std::tie(type, size) = protocol::parse_header(header);
  } catch (const protocol::ProtocolError& e) {
    fail(KernelFailure::Kind::kProtocol, std::string("malformed protocol message: ") + e.what());
  }
  if (size > max_payload) {
    if (expected == Type::kDescriptor)
      fail(KernelFailure::Kind::kProtocol,
           fmt::format("protocol violation: the kernel's descriptor announces {} bytes, over attest's cap of {} bytes "
                       "for a descriptor (its path names and predicates make it long: declare fewer paths)",
                       size, max_payload));
    fail(KernelFailure::Kind::kProtocol,
         fmt::format("protocol violation: a reply announces {} bytes, more than the {} this call can need", size,
                     max_payload));
  }
  std::string payload(size, '\0');
  if (ReadResult r =
          read_with_deadline(child_.from_child, child_.pidfd, child_.pid, payload.data(), size, limit.deadline);
      r != ReadResult::kOk)
    fail_read(r);
  auto message_of = [&] {
    try {
      protocol::Reader reader(payload);
      return safe_text(reader.str(), kMaxKernelMessage);
    } catch (const protocol::ProtocolError&) {
      return std::string("(unreadable message)");
    }
  };
  if (type == Type::kFault) fail(KernelFailure::Kind::kFault, message_of());
  if (type == Type::kError) {
    const std::string message = message_of();
    stop();
    // The host names the plugin itself; other kernels get their command as a prefix.
    throw KernelLoadError(message.starts_with(options_.description) ? message : options_.description + ": " + message);
  }
  if (type != expected)
    fail(KernelFailure::Kind::kProtocol, fmt::format("malformed protocol message: expected type {}, got {}",
                                                     static_cast<int>(expected), static_cast<int>(type)));
  costs_.record(work, std::chrono::duration<double>(Clock::now() - limit.start).count());
  return payload;
}

std::string ProcessKernel::call(Type request, const std::string& payload, Type reply, std::uint64_t max_reply,
                                double work) const {
  return exchange(request, {std::string_view(payload)}, reply, max_reply, work);
}

std::string ProcessKernel::exchange(Type request, std::initializer_list<std::string_view> payload, Type reply,
                                    std::uint64_t max_reply, double work) const {
  const Containment& c = options_.containment;
  if (c.deadline && Clock::now() >= *c.deadline) {
    if (child_.pid >= 0) kill_child();
    throw KernelFailure(KernelFailure::Kind::kDeadline, "the whole-run deadline was reached");
  }
  if (child_.pid < 0) start();  // restart after a crash or hang
  const CallLimit limit = limit_of(reply, work);
  send_request(request, payload, limit);
  return read_reply(reply, max_reply, work, limit);
}

void ProcessKernel::send_request(Type request, std::initializer_list<std::string_view> payload,
                                 const CallLimit& limit) const {
  // The request must be taken within the call's limit; a failed write means the child is gone,
  // and the read that follows reports how it ended.
  std::size_t size = 0;
  for (std::string_view part : payload) size += part.size();
  const std::string header = protocol::frame_header(request, size);
  ReadResult r = write_with_deadline(child_.to_child, header.data(), header.size(), limit.deadline);
  for (std::string_view part : payload)
    if (r == ReadResult::kOk) r = write_with_deadline(child_.to_child, part.data(), part.size(), limit.deadline);
  if (r == ReadResult::kTimeout) fail_at_limit(limit, header.size() + size);
}

template <typename Result>
Result ProcessKernel::computed(Type request, const std::string& payload, Type reply, std::uint64_t max_reply,
                               double work, Result (*read)(protocol::Reader&), const char* what,
                               const char* who) const {
  const std::string bytes = call(request, payload, reply, max_reply, work);
  Result result;
  try {
    protocol::Reader r(bytes);
    result = read(r);
  } catch (const protocol::ProtocolError& e) {
    fail(KernelFailure::Kind::kProtocol, fmt::format("malformed {} result: {}", what, e.what()));
  }
  if (!result.fault.empty())
    throw KernelFailure(KernelFailure::Kind::kFault, safe_text(result.fault, kMaxKernelMessage));
  if (result.status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("{} returned status {}: {}", who, result.status,
                                                                  safe_text(result.error, kMaxKernelMessage)));
  return result;
}

void ProcessKernel::forward(const Problem& p, std::span<float> o, std::span<float> lse) const {
  if (!caps_.forward()) throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel is decode-only (no forward)");
  protocol::Writer w;
  protocol::write_problem(w, to_wire(p, caps_.precision));
  const protocol::ForwardResult result =
      computed(Type::kForward, w.bytes(), Type::kForwardResult, reply_bound(3, p.o_size() + p.lse_size()),
               forward_work(p), protocol::read_forward_result, "forward", "kernel");
  const Scalar o_format = caps_.precision.o;  // O arrives in its storage format
  if (result.o.size() != o.size() * info(o_format).bytes ||
      (caps_.lse() && !lse.empty() && result.lse.size() != lse.size()))
    fail(KernelFailure::Kind::kProtocol, "malformed forward result: output sizes do not match the problem");
  const std::vector<float> values = floats_from_storage(result.o.data(), o.size(), o_format);
  std::copy(values.begin(), values.end(), o.begin());
  if (caps_.lse() && !lse.empty()) std::copy(result.lse.begin(), result.lse.end(), lse.begin());
  last_path_ = result.path.empty() ? "default" : safe_text(result.path, kMaxKernelName);
}

void ProcessKernel::backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const {
  if (!caps_.backward()) throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel declares no backward");
  protocol::Writer w;
  protocol::write_backward(w, to_wire(p, in, caps_.precision));
  last_backward_path_.clear();  // a call that fails reported nothing
  const std::uint64_t elements = p.q_size() + p.k_size() + p.v_size() + p.modifiers.sinks.size();
  const protocol::BackwardResult result =
      computed(Type::kBackward, w.bytes(), Type::kBackwardResult, reply_bound(3, elements), backward_work(p),
               protocol::read_backward_result, "backward", "backward");
  last_backward_path_ = safe_text(result.path, kMaxKernelName);
  if (!gradients_from_storage(result.dq, result.dk, result.dv, result.dsinks, caps_.precision, out))
    fail(KernelFailure::Kind::kProtocol, "malformed backward result: gradient sizes do not match the problem");
}

void ProcessKernel::merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const {
  if (!caps_.merge) throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel declares no merge");
  protocol::Writer w;
  protocol::write_merge(w, to_wire(in));
  const protocol::MergeResult result =
      computed(Type::kMerge, w.bytes(), Type::kMergeResult, reply_bound(3, o.size() + lse.size()), merge_work(in),
               protocol::read_merge_result, "merge", "merge");
  if (result.o.size() != o.size() || result.lse.size() != lse.size())
    fail(KernelFailure::Kind::kProtocol, "malformed merge result: output sizes do not match the merge");
  std::copy(result.o.begin(), result.o.end(), o.begin());
  std::copy(result.lse.begin(), result.lse.end(), lse.begin());
}

void ProcessKernel::forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const {
  if (!caps_.packed) throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel declares no packed layout");
  protocol::WirePacked wire;
  wire.cu_seqlens_q = call.cu_seqlens_q, wire.cu_seqlens_k = call.cu_seqlens_k;
  wire.header = packed_problem_view(call, nullptr, nullptr);
  wire.alibi_slopes = call.terms.modifiers.alibi_slopes, wire.sinks = call.terms.modifiers.sinks;
  wire.q = call.q, wire.k = call.k, wire.v = call.v;
  wire.want_lse = lse.empty() ? 0 : 1;
  protocol::Writer w;
  protocol::write_packed(w, wire);
  Problem work = call.terms;  // every sequence as long as the longest: an upper estimate
  work.shape.q_len = std::max(1, call.max_seqlen_q), work.shape.k_len = std::max(1, call.max_seqlen_k);
  last_packed_path_.clear();  // a call that fails reported nothing
  const protocol::PackedResult result =
      computed(Type::kForwardPacked, w.bytes(), Type::kForwardPackedResult, reply_bound(3, o.size() + lse.size()),
               forward_work(work), protocol::read_packed_result, "packed forward", "forward_packed");
  if (result.o.size() != o.size() || result.lse.size() != lse.size())
    fail(KernelFailure::Kind::kProtocol, "malformed packed forward result: output sizes do not match the call");
  last_packed_path_ = safe_text(result.path, kMaxKernelName);
  std::copy(result.o.begin(), result.o.end(), o.begin());
  std::copy(result.lse.begin(), result.lse.end(), lse.begin());
}

namespace {

class ProcessDecodeSession final : public DecodeSession {
 public:
  ProcessDecodeSession(const ProcessKernel& kernel, std::uint64_t id, const DecodeConfig& config)
      : kernel_(kernel), id_(id), config_(config), generation_(kernel.generation()) {}
  ~ProcessDecodeSession() override {
    if (kernel_.generation() != generation_) return;
    try {
      kernel_.call(Type::kDecodeClose, protocol::Writer().u64(id_).bytes(), Type::kClosed, 64);
    } catch (const std::exception&) {
      // The session dies with the process; nothing else to release.
    }
  }

  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
            std::span<float> lse) override {
    if (kernel_.generation() != generation_)
      throw KernelFailure(KernelFailure::Kind::kCrash, "the kernel process was restarted; its decode session is gone");
    protocol::Writer w;
    const Precision& precision = kernel_.capabilities().precision;  // buffers travel in their storage formats
    const StoredStep bytes = stored_step(config_, precision, n, q, k, v);
    w.u64(id_).i32(n).i32(lse.empty() ? 0 : 1).array(bytes.q).array(bytes.k).array(bytes.v);
    const std::uint64_t rows = std::uint64_t(config_.batch) * config_.heads * n;
    const std::string reply =
        kernel_.call(Type::kDecodeStep, w.bytes(), Type::kDecodeResult, reply_bound(1, rows * (config_.value_dim + 1)),
                     decode_step_work(config_, length_, n));
    protocol::DecodeResult result;
    try {
      protocol::Reader r(reply);
      result = protocol::read_decode_result(r);
    } catch (const protocol::ProtocolError& e) {
      throw KernelFailure(KernelFailure::Kind::kProtocol, std::string("malformed decode result: ") + e.what());
    }
    if (result.status != ATTEST_OK)
      throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("decode step returned status {}: {}", result.status,
                                                                    safe_text(result.error, kMaxKernelMessage)));
    if (result.o.size() != o.size() * info(precision.o).bytes || result.lse.size() != lse.size())
      throw KernelFailure(KernelFailure::Kind::kProtocol,
                          "malformed decode result: output sizes do not match the step");
    const std::vector<float> values = floats_from_storage(result.o.data(), o.size(), precision.o);
    std::copy(values.begin(), values.end(), o.begin());
    std::copy(result.lse.begin(), result.lse.end(), lse.begin());
    kernel_.record_path(safe_text(result.path, kMaxKernelName));
    length_ += n;
  }
  long long length() const override { return length_; }
  std::size_t cache_bytes() const override { return 0; }  // not reported across the protocol
  std::vector<long long> retained_positions(int b, int t) const override {
    if (kernel_.capabilities().cache.kind != CachePolicy::Kind::kExplicit) return {};
    if (kernel_.generation() != generation_)
      throw KernelFailure(KernelFailure::Kind::kCrash, "the kernel process was restarted; its decode session is gone");
    const std::string reply = kernel_.call(Type::kDecodeRetained, protocol::Writer().u64(id_).i32(b).i32(t).bytes(),
                                           Type::kRetained, reply_bound(1, 2 * (length_ + 1)));
    protocol::Retained result;
    try {
      protocol::Reader r(reply);
      result = protocol::read_retained(r);
    } catch (const protocol::ProtocolError& e) {
      throw KernelFailure(KernelFailure::Kind::kProtocol, std::string("malformed retained positions: ") + e.what());
    }
    if (result.status != ATTEST_OK)
      throw KernelFailure(KernelFailure::Kind::kStatus,
                          fmt::format("decode_retained returned status {}: {}", result.status,
                                      safe_text(result.error, kMaxKernelMessage)));
    return {result.positions.begin(), result.positions.end()};
  }

 private:
  const ProcessKernel& kernel_;
  std::uint64_t id_;
  DecodeConfig config_;
  std::uint64_t generation_;
  long long length_ = 0;
};

}  // namespace

std::unique_ptr<DecodeSession> ProcessKernel::open_decode(const DecodeConfig& config) const {
  config.validate();
  protocol::Writer w;
  protocol::write_decode_config(w, to_wire(config));
  const std::string reply = call(Type::kDecodeOpen, w.bytes(), Type::kDecodeOpened, reply_bound(1, 0));
  protocol::DecodeOpened opened;
  try {
    protocol::Reader r(reply);
    opened = protocol::read_decode_opened(r);
  } catch (const protocol::ProtocolError& e) {
    throw KernelFailure(KernelFailure::Kind::kProtocol, std::string("malformed decode open result: ") + e.what());
  }
  if (opened.status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("decode open returned status {}: {}", opened.status,
                                                                  safe_text(opened.error, kMaxKernelMessage)));
  return std::make_unique<ProcessDecodeSession>(*this, opened.session, config);
}

}  // namespace attest

namespace attest {

std::size_t ProcessKernel::page_bytes(const DecodeConfig& config) const {
  if (caps_.page_tokens < 1) throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel declares no block tables");
  protocol::Writer w;
  protocol::write_decode_config(w, to_wire(config), true);
  const std::string reply = call(Type::kPageBytes, w.bytes(), Type::kPageBytesResult, reply_bound(1, 2));
  std::int32_t status = 0;
  std::string error;
  std::int64_t bytes = 0;
  try {
    protocol::Reader r(reply);
    status = r.i32(), error = r.str(), bytes = r.i64();
    r.expect_end();
  } catch (const protocol::ProtocolError& e) {
    fail(KernelFailure::Kind::kProtocol, std::string("malformed page size: ") + e.what());
  }
  if (status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus,
                        fmt::format("page_bytes returned status {}: {}", status, safe_text(error, kMaxKernelMessage)));
  if (bytes < 1 || bytes > (std::int64_t{1} << 30))
    fail(KernelFailure::Kind::kProtocol, fmt::format("page_bytes returned {} bytes (1 to 2^30)", bytes));
  return page_sizes_.checked(w.bytes(), static_cast<std::size_t>(bytes));
}

void ProcessKernel::decode_paged(const DecodeConfig& config, const PagedStep& step) const {
  const std::size_t bytes_per_page = page_bytes(config);
  check_paged_step(config, caps_.page_tokens, bytes_per_page, step);
  protocol::WirePagedStep wire;
  wire.page_bytes = static_cast<std::int64_t>(bytes_per_page);
  wire.pool = {reinterpret_cast<const std::uint8_t*>(step.pool.data()), step.pool.size()};
  wire.table_width = step.table_width;
  wire.tables.assign(step.tables.begin(), step.tables.end());
  wire.lengths.assign(step.lengths.begin(), step.lengths.end());
  wire.counts.assign(step.counts.begin(), step.counts.end());
  wire.want_lse = step.lse.empty() ? 0 : 1;
  StoredStep bytes = stored_paged(config, caps_.precision, step.counts, step.q, step.k, step.v);
  wire.q = std::move(bytes.q), wire.k = std::move(bytes.k), wire.v = std::move(bytes.v);
  // The pool (up to attest's pool limit) travels from the caller's pages, and comes back as a view
  // into the reply: attest holds it once more per call, not three times (page_pool.cpp's limit).
  protocol::Writer head, tail;
  protocol::write_decode_config(head, to_wire(config), true);
  protocol::write_paged_step_head(head, wire);
  protocol::write_paged_step_tail(tail, wire);
  double work = 0;
  DecodeConfig one = config;
  one.batch = 1;
  for (std::size_t b = 0; b < step.counts.size(); ++b) work += decode_step_work(one, step.lengths[b], step.counts[b]);
  const std::string_view pool(reinterpret_cast<const char*>(step.pool.data()), step.pool.size());
  const std::string reply = exchange(Type::kDecodePaged, {head.bytes(), pool, tail.bytes()}, Type::kDecodePagedResult,
                                     reply_bound(4, step.pool.size() / 4 + step.o.size() + step.lse.size()), work);
  protocol::PagedResult result;
  try {
    protocol::Reader r(reply);
    result = protocol::read_paged_result(r);
  } catch (const protocol::ProtocolError& e) {
    fail(KernelFailure::Kind::kProtocol, std::string("malformed paged decode result: ") + e.what());
  }
  if (!result.fault.empty())
    throw KernelFailure(KernelFailure::Kind::kFault, safe_text(result.fault, kMaxKernelMessage));
  if (result.status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("decode_paged returned status {}: {}", result.status,
                                                                  safe_text(result.error, kMaxKernelMessage)));
  if (result.pool.size() != step.pool.size() || result.o.size() != step.o.size() * info(caps_.precision.o).bytes ||
      result.lse.size() != step.lse.size())
    fail(KernelFailure::Kind::kProtocol, "malformed paged decode result: pool or output sizes do not match the step");
  std::memcpy(step.pool.data(), result.pool.data(), result.pool.size());
  const std::vector<float> values = floats_from_storage(result.o.data(), step.o.size(), caps_.precision.o);
  std::copy(values.begin(), values.end(), step.o.begin());
  std::copy(result.lse.begin(), result.lse.end(), step.lse.begin());
  last_path_ = result.path.empty() ? "default" : safe_text(result.path, kMaxKernelName);
}

}  // namespace attest
