// A kernel's declared paths (ABI 2.2) checked at their edges: problems with the lengths where one
// declared predicate ends and the next begins, one batch entry or several, features as drawn,
// each run once (no reference: run_guarded fails a call served by another path than the
// declaration names). The property stage then tests each path on problems bent into its predicate.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "attest/properties/case_id.h"
#include "attest/properties/generators.h"
#include "attest/properties/harness.h"
#include "attest/properties/problem_file.h"
#include "attest/properties/safe_text.h"
#include "certify.h"
#include "check_selection.h"
#include "progress.h"

namespace attest {

DeclaredEdges declared_edges(const Capabilities& caps) {
  DeclaredEdges e{{1, 17, 70}, {5, 100, 600}};
  auto edges = [](const Range& r, std::vector<int>& out) {
    if (r.unlimited()) return;
    for (long long x : {r.min - 1, r.min, r.max, r.max + 1})
      if (x >= 1 && x <= 4096) out.push_back(static_cast<int>(x));
  };
  for (const PathPredicate& declared : caps.paths) edges(declared.q_len, e.queries), edges(declared.k_len, e.keys);
  for (std::vector<int>* v : {&e.queries, &e.keys}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return e;
}

CheckResult check_declared_paths(const Kernel& kernel, const CertifyOptions& options) {
  const Capabilities caps = kernel.capabilities();
  CheckResult r{kernel.name(), "deterministic", kDeclaredPathsCheck};
  const auto start = std::chrono::steady_clock::now();
  const DeclaredEdges edges = declared_edges(caps);
  const rc::Gen<ProblemSpec> specs = gen_spec(caps);
  int seed = 0;
  for (int tq : edges.queries)
    for (int tk : edges.keys)
      for (const char* batch : {"batch: 1", ""}) {
        if (r.failures > 0) break;
        ProblemNeeds needs;
        needs.lengths = {{tq, tk}};
        if (*batch) needs.force = {batch};
        const Problem p = build_problem(specs(rc::Random(++seed), 50).value(), caps, needs);
        if (!caps.supports(p)) continue;
        ++r.cases;
        try {
          run_guarded(kernel, p);
          ++r.effective;
          ++path_entry(r.paths, kernel.last_path()).cases;
        } catch (const KernelLoadError&) {
          throw;
        } catch (const std::exception& e) {
          r.failures = 1;
          r.first_failure = fmt::format("Tq {} Tk {} B {}: {}", tq, tk, p.shape.batch, e.what());
          r.failing_case = case_id(p);
          r.counterexample_path =
              counterexample_path(options.out_dir + "/counterexamples", "declared_paths", kernel.name(), p);
          try {
            save_problem_file(
                r.counterexample_path,
                {p, "matches_reference", options.kernel_source.empty() ? kernel.name() : options.kernel_source,
                 options.isolated, e.what(), 0});
          } catch (const std::exception& save) {
            std::cerr << "attest: cannot save counterexample: " << save.what() << "\n";
            r.counterexample_path.clear();
          }
          break;
        }
      }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report_check(options, r, fmt::format("{} of {} cases, {:.2f} s", r.effective, r.cases, r.seconds));
  return r;
}

}  // namespace attest
