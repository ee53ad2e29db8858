// What a certificate certified, beyond a path or a name: the SHA-256 of each file
// that makes up the kernel, and the run's options. `attest merge` refuses shards that differ in
// either, so shards of two builds at one path never merge into one CERTIFIED.
#pragma once

#include <map>
#include <string>

namespace attest {

// Hex SHA-256 of a file's bytes; throws FileError when it cannot be read.
std::string file_sha256(const std::string& path);

// file -> SHA-256 for a kernel as named on the command line: a plugin's library; for
// "cmd:PROGRAM ARGS" every word that names a regular file (the program, its script); none for a
// built-in kernel or a mutant, named without a '/' (attest's version identifies those).
std::map<std::string, std::string> kernel_identity(const std::string& source);

}  // namespace attest
