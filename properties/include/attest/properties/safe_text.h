// Text that came from outside (a kernel's name, error message or path, a file's strings) made
// safe to print, to put in JSON and XML, and to use in a file name.
#pragma once

#include <cstddef>
#include <string>

namespace attest {

// One line of valid UTF-8 with no control characters (each invalid byte or control character
// becomes '?', a line break or tab a space), at most `max_bytes` bytes; longer text is cut and
// ends with "...(N bytes cut)".
std::string safe_text(const std::string& text, std::size_t max_bytes);

// A file-name stem: [A-Za-z0-9._-] only (others become '_'), at most 64 characters; a longer
// or altered name gets a short hash of the original, so distinct names stay distinct.
std::string file_stem(const std::string& name);

}  // namespace attest
