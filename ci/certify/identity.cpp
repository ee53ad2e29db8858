#include "identity.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "attest/properties/file_io.h"

namespace attest {

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError("cannot read " + path + " to record its SHA-256");
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) throw FileError("SHA-256 unavailable");
  std::array<char, 1 << 16> block;
  while (in.read(block.data(), block.size()) || in.gcount() > 0)
    EVP_DigestUpdate(context.get(), block.data(), static_cast<std::size_t>(in.gcount()));
  if (in.bad()) throw FileError("cannot read " + path + " to record its SHA-256");
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest;
  unsigned length = 0;
  EVP_DigestFinal_ex(context.get(), digest.data(), &length);
  std::string hex;
  for (unsigned i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::map<std::string, std::string> kernel_identity(const std::string& source) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  auto add = [&](const std::string& path) {
    if (std::filesystem::is_regular_file(path, ec)) files[path] = file_sha256(path);
  };
  if (source.starts_with("cmd:")) {
    std::istringstream words(source.substr(4));
    for (std::string word; words >> word;) add(word);
  } else if (source.find('/') != std::string::npos) {  // a plugin, recorded by its absolute path
    add(source);
  }
  return files;
}

}  // namespace attest
