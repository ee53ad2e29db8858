// `attest report CERT.json --markdown FILE --html FILE`: a certificate (a whole run's, a shard's or a
// merge's) written again for people: Markdown for a CI job summary, a self-contained HTML page.
#pragma once

#include <string>

namespace attest {

struct ReportRequest {
  std::string certificate;    // the JSON certificate to read
  std::string markdown_path;  // where the Markdown goes; -: stdout
  std::string html_path;      // where the HTML page goes; -: stdout
};

// Exit code 0; a certificate that cannot be read, or an output that cannot be written, throws
// (a one-line error, exit 2).
int run_report(const ReportRequest& request);

}  // namespace attest
