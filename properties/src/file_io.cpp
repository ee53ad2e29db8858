#include "attest/properties/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace attest {
namespace {

namespace fs = std::filesystem;

std::string reason() { return std::strerror(errno); }

fs::path folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// What parsing a document would build, counted without building it: its depth, and the memory its
// values take as nlohmann::json (a scalar, or an element's slot, about 24 bytes with the arrays'
// spare capacity; an array or object about 96, its own allocation included; a string or key 64
// and its characters). Stops early past the depth limit.
struct JsonShape {
  int depth = 0;
  std::size_t parse_bytes = 0;
};

JsonShape json_shape(const std::string& text) {
  JsonShape shape;
  int depth = 0;
  std::size_t scalars = 1, containers = 0, strings = 0, string_bytes = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      ++string_bytes;
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true, ++strings;
    else if (c == ',')
      ++scalars;
    else if (c == '[' || c == '{')
      ++containers, shape.depth = std::max(shape.depth, ++depth);
    else if (c == ']' || c == '}')
      --depth;
    if (shape.depth > kMaxJsonDepth) break;
  }
  shape.parse_bytes = 24 * scalars + 96 * containers + 64 * strings + string_bytes;
  return shape;
}

}  // namespace

std::string read_file(const std::string& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer must not wait; only regular files are read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw FileError(fmt::format("cannot open {}: {}", path, reason()));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool folder = S_ISDIR(st.st_mode);
    ::close(fd);
    throw FileError(folder ? path + " is a folder, not a file"
                           : path + " is not a regular file (a FIFO, device or socket): refused before reading");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = reason();
      ::close(fd);
      throw FileError(fmt::format("cannot read {}: {}", path, why));
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > max_bytes) {
      ::close(fd);
      throw FileError(fmt::format("{} is larger than {} bytes", path, max_bytes));
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

nlohmann::json parse_json(const std::string& text, const std::string& what) {
  if (text.size() > kMaxJsonBytes) throw FileError(fmt::format("{}: larger than {} bytes", what, kMaxJsonBytes));
  const JsonShape shape = json_shape(text);
  if (shape.depth > kMaxJsonDepth)
    throw FileError(fmt::format("{}: JSON nested deeper than the limit of {} levels (depth)", what, kMaxJsonDepth));
  if (shape.parse_bytes > kMaxJsonParseBytes)
    throw FileError(
        fmt::format("{}: too many JSON values: parsing would take about {} MiB, more than the limit of {} MiB", what,
                    shape.parse_bytes >> 20, kMaxJsonParseBytes >> 20));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("{}: not valid JSON: {}", what, e.what()));
  }
}

void write_file_atomically(const std::string& path, const std::string& text) {
  static std::atomic<unsigned> counter{0};
  const fs::path target(path);
  const fs::path tmp =
      folder_of(path) / fmt::format(".{}.tmp.{}.{}", target.filename().string(), ::getpid(), counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw FileError(fmt::format("cannot write {}: {}", path, reason()));
  auto give_up = [&](const std::string& why) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw FileError(fmt::format("cannot write {}: {} (the old file, if any, is unchanged)", path, why));
  };
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) give_up(n < 0 ? reason() : "short write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) give_up(reason());
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw FileError(fmt::format("cannot write {}: {}", path, reason()));
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string why = reason();
    ::unlink(tmp.c_str());
    throw FileError(fmt::format("cannot write {}: {}", path, why));
  }
}

void check_writable(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw FileError(fmt::format("{} {}: is a folder", flag, path));
  // Writing renames a new file over the target: a device or a link there would be replaced by a
  // regular file (as root, /dev/null itself). Only a regular file, or nothing, may be named.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw FileError(
        fmt::format("{} {}: is not a regular file (a device, link, FIFO or socket); attest replaces its "
                    "outputs by renaming a new file over them: name a regular file",
                    flag, path));
  const fs::path folder = folder_of(path);
  if (!fs::is_directory(folder, ec))
    throw FileError(fmt::format("{} {}: folder {} does not exist", flag, path, folder.string()));
  // The write goes to a temporary name first: both names must fit, or the run's result is lost.
  const long name_max = ::pathconf(folder.c_str(), _PC_NAME_MAX);
  const std::size_t name = fs::path(path).filename().string().size();
  if (name_max > 0 && name + kTemporaryNameExtra > static_cast<std::size_t>(name_max))
    throw FileError(
        fmt::format("{}: the file name is {} bytes; attest writes it under a temporary name {} bytes "
                    "longer and this folder allows {}",
                    flag, name, kTemporaryNameExtra, name_max));
  if (fs::absolute(path, ec).string().size() + kTemporaryNameExtra >= PATH_MAX)
    throw FileError(fmt::format("{}: the path is longer than the system's limit of {} bytes", flag, PATH_MAX));
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw FileError(fmt::format("{} {}: cannot write in {}: {}", flag, path, folder.string(), reason()));
}

void check_not_an_input(const std::string& flag, const std::string& output, const std::vector<std::string>& inputs) {
  if (output.empty()) return;
  std::error_code ec;
  for (const std::string& input : inputs)
    if (fs::is_regular_file(input, ec) && same_file_path(input, output))
      throw FileError(
          fmt::format("{} {}: is an input of this run; attest would replace it: name another file", flag, output));
}

bool same_file_path(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code error_a, error_b;
  const auto canonical_a = std::filesystem::weakly_canonical(a, error_a);
  const auto canonical_b = std::filesystem::weakly_canonical(b, error_b);
  if (error_a || error_b) return a == b;
  return canonical_a == canonical_b;
}

}  // namespace attest
