// A certificate as Markdown for a CI job summary (GitHub's $GITHUB_STEP_SUMMARY, GitLab's
// report pages): the run's summary, a row per kernel, each kernel's verdict line and the checks
// that ran (in a collapsed block), and the failing checks with their replay commands.
#pragma once

#include <string>

#include "certificate.h"

namespace attest {

std::string markdown_report(const CertificateInfo& info);

}  // namespace attest
