#include "report_command.h"

#include "attest/file_io.h"
#include "document_output.h"
#include "flags.h"
#include "markdown_report.h"
#include "merge.h"

namespace attest {

int run_report(const ReportRequest& request) {
  if (request.markdown_path.empty()) throw FlagError("report: --markdown FILE is required (-: stdout)");
  if (!is_stdout(request.markdown_path)) check_writable("--markdown", request.markdown_path);
  check_not_an_input("--markdown", request.markdown_path, {request.certificate});
  const CertificateInfo info = read_certificate(request.certificate);
  const DocumentOutput documents(is_stdout(request.markdown_path));
  documents.write(request.markdown_path, markdown_report(info));
  return 0;
}

}  // namespace attest
