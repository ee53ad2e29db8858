// The library's certify: the `attest certify` stages on one kernel, the certificate as a value.
#include "attest/certify_api.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "attest/abi/abi_adapter.h"
#include "attest/abi/process_kernel_server.hpp"
#include "attest/abi/wire_conversion.h"
#include "certificate.h"
#include "certify.h"
#include "containment.h"
#include "forked_object.h"
#include "frozen_declaration.h"
#include "kernel_resolver.h"
#include "process_kernel.h"
#include "run_flags.h"

namespace attest::api {
namespace {

attest::CertifyOptions internal_options(const CertifyOptions& o, const std::string& source) {
  attest::CertifyOptions options;
  options.property_cases = parse_budget("budget", o.budget);
  options.sizes =
      sized_flags(sizes_for_budget(options.property_cases), o.max_len > 0 ? std::to_string(o.max_len) : "", {}, {}, "");
  if (o.long_seconds >= 0) options.sizes.time_budget = o.long_seconds;
  options.sized_stages = o.size_stages;
  options.seed = seed_or_clock(o.seed);
  options.out_dir = o.out_dir;
  options.progress = false;
  options.kernel_source = source;
  return options;
}

// The caller's kernel as the certificate and its messages name it, contained or not.
std::string description_of(const Kernel& kernel) { return "the in-process kernel " + kernel.name(); }

// A declaration the C ABI refuses (a contract range with min > max, tiles below 0, |V| <= 0.5, ...) is
// refused before any check, in process as contained: one line, the same either way. Contained, the
// child's descriptor would be refused in the handshake; in process nothing read it through the ABI,
// and certify judged the kernel against a declaration no plugin could make.
void refuse_what_the_abi_refuses(const Kernel& kernel) {
  try {
    capabilities_from_descriptor(descriptor_from_capabilities(kernel.capabilities(), kernel.name()));
  } catch (const std::invalid_argument& e) {
    throw KernelLoadError(description_of(kernel) + ": " + e.what());
  }
}

// An attest::Kernel of the caller's, served from a fork of this process like any kernel process: its
// exit(0), crash or hang is a failed call with a message (and a fresh copy serves the next), never the
// end or a hang of the caller's test binary.
std::unique_ptr<ProcessKernel> contained(const Kernel& kernel, const CertifyOptions& o) {
  ProcessKernel::Options served;
  served.description = description_of(kernel);
  served.containment.timeout_seconds = o.timeout_seconds;
  served.containment.memory_limit_bytes = default_memory_limit();
  served.serve_in_child = [&kernel](int in, int out) {
    AbiAdapter adapter(std::make_unique<FrozenDeclaration>(kernel));
    return protocol::serve_descriptor(adapter.descriptor(), in, out);
  };
  return std::make_unique<ProcessKernel>(std::move(served));
}

// The same for a kernel built by the caller's factory in each child: its worker threads, started in
// its constructor, live where its calls run. The name comes from the child's descriptor, and a
// declaration the C ABI refuses is refused in the handshake (KernelLoadError) before any check.
std::unique_ptr<ProcessKernel> contained(const KernelFactory& make, const CertifyOptions& o) {
  ProcessKernel::Options served;
  served.description = "the kernel built by certify's factory";
  served.containment.timeout_seconds = o.timeout_seconds;
  served.containment.memory_limit_bytes = default_memory_limit();
  served.serve_in_child = [&make](int in, int out) {
    // The child never returns into the caller's code: a factory that throws ends it, said on stderr.
    try {
      const std::unique_ptr<Kernel> kernel = make();
      if (!kernel) throw std::invalid_argument("it returned no kernel");
      AbiAdapter adapter(std::make_unique<FrozenDeclaration>(*kernel));
      return protocol::serve_descriptor(adapter.descriptor(), in, out);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attest: certify's kernel factory failed in the child: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "attest: certify's kernel factory threw a non-standard exception in the child\n");
    }
    return 1;
  };
  return std::make_unique<ProcessKernel>(std::move(served));
}

// `isolated`: the kernel runs in a child process.
Certificate certificate_of(const Kernel& kernel, const std::string& source, const CertifyOptions& o, bool isolated) {
  attest::CertifyOptions options = internal_options(o, source);
  options.isolated = isolated;
  Oracle oracle(1024);
  const FrozenDeclaration frozen(kernel);  // one reading of its declaration: the report's and the checks'
  KernelReport report{source, frozen.name(), frozen.capabilities(), certify_kernel(frozen, oracle, options), {}, {},
                      {}};
  report.uncontained = !options.isolated;
  Certificate c;
  c.certified = report.passed();
  c.kernel = report.name;
  c.report = format_report(report);
  std::istringstream lines(c.report);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("CERTIFIED ") || line.starts_with("NOT CERTIFIED ")) c.verdict = line;
  // A library kernel has no name attest could load it by: its replay names the problem file, and the
  // kernel is the caller's to give (a plugin or cmd: serving it).
  const bool library = source.starts_with("library:");
  for (const CheckResult& r : report.checks)
    c.checks.push_back({r.stage, r.check, to_string(r.status()), r.cases, r.effective, r.first_failure,
                        r.counterexample_path,
                        r.counterexample_path.empty()
                            ? std::string()
                            : "attest replay " + r.counterexample_path + (library ? " --kernel YOUR_KERNEL" : "")});
  c.json = certificate_json(CertificateInfo{options.seed, options.property_cases, {report}, {}, {}});
  return c;
}

}  // namespace

std::vector<const Check*> Certificate::failed() const {
  std::vector<const Check*> out;
  for (const Check& c : checks)
    if (c.status == "fail" || c.status == "insufficient") out.push_back(&c);
  return out;
}

// A per-call limit of 0, a negative or NaN one would call every kernel hung.
static void check_timeout(const CertifyOptions& options) {
  if (!(options.timeout_seconds > 0) || !std::isfinite(options.timeout_seconds))
    throw std::invalid_argument("timeout_seconds must be a finite number of seconds above 0, got " +
                                std::to_string(options.timeout_seconds));
}

Certificate certify(const Kernel& kernel, const CertifyOptions& options) {
  check_timeout(options);
  const std::string source = "library:" + kernel.name();
  refuse_what_the_abi_refuses(kernel);
  if (options.in_process) return certificate_of(kernel, source, options, false);
  const int threads = threads_of_this_process();  // before the fork: none of them is the child's
  return certificate_of(ForkedObject(contained(kernel, options), threads), source, options, true);
}

Certificate certify(const KernelFactory& make, const CertifyOptions& options) {
  check_timeout(options);
  if (!make) throw std::invalid_argument("certify was given an empty kernel factory");
  if (options.in_process) {
    const std::unique_ptr<Kernel> kernel = make();
    if (!kernel) throw std::invalid_argument("certify's kernel factory returned no kernel");
    return certify(*kernel, options);
  }
  const std::unique_ptr<ProcessKernel> kernel = contained(make, options);
  return certificate_of(*kernel, "library:" + kernel->name(), options, true);
}

Certificate certify(const std::string& kernel, const CertifyOptions& options) {
  check_timeout(options);
  if (!options.attest_executable.empty()) set_kernel_host_executable(options.attest_executable);
  LoadOptions load;
  load.containment.timeout_seconds = options.timeout_seconds;
  load.containment.memory_limit_bytes = default_memory_limit();
  const std::unique_ptr<Kernel> resolved = resolve_kernel(kernel, load);
  return certificate_of(*resolved, kernel, options, dynamic_cast<const ProcessKernel*>(resolved.get()) != nullptr);
}

}  // namespace attest::api
