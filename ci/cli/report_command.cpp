#include "report_command.h"

#include <utility>

#include "attest/properties/file_io.h"
#include "document_output.h"
#include "flags.h"
#include "html_report.h"
#include "markdown_report.h"
#include "merge.h"

namespace attest {

int run_report(const ReportRequest& request) {
  if (request.markdown_path.empty() && request.html_path.empty())
    throw FlagError("report: give --markdown FILE or --html FILE (-: stdout)");
  if (is_stdout(request.markdown_path) && is_stdout(request.html_path))
    throw FlagError("report: only one of --markdown and --html can go to stdout");
  if (!request.markdown_path.empty() && request.markdown_path == request.html_path)
    throw FlagError("report: --markdown and --html name the same file");
  for (const auto& [flag, path] : {std::pair{"--markdown", request.markdown_path}, {"--html", request.html_path}}) {
    if (path.empty()) continue;
    if (!is_stdout(path)) check_writable(flag, path);
    check_not_an_input(flag, path, {request.certificate});
  }
  const CertificateInfo info = read_certificate(request.certificate);
  const DocumentOutput documents(is_stdout(request.markdown_path) || is_stdout(request.html_path));
  if (!request.markdown_path.empty()) documents.write(request.markdown_path, markdown_report(info));
  if (!request.html_path.empty()) documents.write(request.html_path, html_report(info));
  return 0;
}

}  // namespace attest
