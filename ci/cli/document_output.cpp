#include "document_output.h"

#include "attest/properties/file_io.h"

namespace attest {

void DocumentOutput::write(const std::string& path, const std::string& text) const {
  if (path.empty()) return;
  if (!is_stdout(path)) return write_file_atomically(path, text);
  std::ostream out(stdout_ ? stdout_ : std::cout.rdbuf());
  out << text;
  out.flush();
  if (!out) throw FileError("cannot write the document to stdout");
}

}  // namespace attest
