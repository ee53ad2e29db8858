// Replays inputs through a fuzz target without libFuzzer (the GCC build): every file given,
// and every file under every directory given. As under libFuzzer, a violation aborts and the
// kernels come from ATTEST_FUZZ_KERNEL through LLVMFuzzerInitialize.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

// Optional, as in libFuzzer: targets without per-process setup do not define it.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  // A weak symbol's address is null when no target defines it; GCC's -Waddress assumes otherwise.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Waddress"
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
#pragma GCC diagnostic pop
  long replayed = 0;
  auto replay = [&](const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay %s (%zu bytes)\n", file.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ++replayed;
  };
  for (int i = 1; i < argc; ++i) {
    const fs::path path(argv[i]);
    if (fs::is_directory(path)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::recursive_directory_iterator(path))
        if (entry.is_regular_file() && entry.path().extension() != ".md") files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) replay(f);
    } else if (fs::exists(path)) {
      replay(path);
    } else {
      std::fprintf(stderr, "no such file or directory: %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("%ld inputs replayed, no violation\n", replayed);
  return 0;
}
