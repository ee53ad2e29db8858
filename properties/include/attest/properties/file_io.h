// Reading and writing files attest does not trust or must not lose (docs/design.md#containment): reads are
// bounded in size, JSON in size and depth; every write goes to a temporary name in the same
// folder and is renamed over the target, so an interrupted run or a full disk leaves the old
// file whole.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace attest {

class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// attest's own memory for one input document stays under 2 GiB: the text (at most kMaxJsonBytes)
// plus what parsing builds, estimated from the text before parsing (at most kMaxJsonParseBytes: a
// problem at T = 65536 with Dk = Dv = 128 needs about 900 MiB; a file of empty arrays or of "0,"
// needs 16-50 times its size and is refused).
inline constexpr std::size_t kMaxJsonBytes = std::size_t{512} << 20;
inline constexpr std::size_t kMaxJsonParseBytes = std::size_t{1} << 30;
// A certificate (baseline or shard) is at most this large: one of 1000 kernels is a few MB, and
// parsing takes about 22 times the file's size in memory.
inline constexpr std::size_t kMaxCertificateBytes = std::size_t{64} << 20;
// attest writes a file under a temporary name this much longer than the file's own name.
inline constexpr std::size_t kTemporaryNameExtra = 40;
inline constexpr int kMaxJsonDepth = 64;

// The file's bytes; throws FileError when it cannot be read or is larger than max_bytes.
std::string read_file(const std::string& path, std::size_t max_bytes = kMaxJsonBytes);

// Parses JSON no deeper than kMaxJsonDepth (checked before parsing: a deep document never
// reaches the recursive parser). `what` names the document in errors.
nlohmann::json parse_json(const std::string& text, const std::string& what);

// Writes text to path atomically (temporary file, fsync, rename); throws FileError naming the
// path and the reason, and then the old file is untouched.
void write_file_atomically(const std::string& path, const std::string& text);

// Throws FileError unless a file can be created at path (its folder exists and is writable, and
// path is nothing yet or a regular file: not a folder, device, link, FIFO or socket). `flag`
// names the option in the message. Creates nothing.
void check_writable(const std::string& flag, const std::string& path);

// Whether two paths name the same file however spelled (./x, a/../x, links), existing or not.
bool same_file_path(const std::string& a, const std::string& b);

// Throws FileError if output (named by flag) is one of the run's input files: writing it would
// replace the plugin being certified or a shard being merged. Inputs that are not files are skipped.
void check_not_an_input(const std::string& flag, const std::string& output, const std::vector<std::string>& inputs);

}  // namespace attest
