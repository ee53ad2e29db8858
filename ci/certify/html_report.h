// A certificate as one self-contained HTML page, for people who would rather look than read: the
// run's summary, each kernel's verdict, its checks with err/bound as bars, a path x check matrix of
// the coverage top-ups' targets, per path a matrix of the pairs of classes reached (html_report_pairs.h),
// and the failing checks with their cases and replay commands.
// No script and nothing fetched: the page shows the same in any browser, offline.
#pragma once

#include <string>

#include "certificate.h"

namespace attest {

std::string html_report(const CertificateInfo& info);

namespace html_page {
// A kernel's name, its messages and its path names are the kernel's to choose: escaped everywhere.
std::string escaped(const std::string& text);
}  // namespace html_page

}  // namespace attest
