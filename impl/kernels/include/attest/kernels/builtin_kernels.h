// Factories for the built-in kernels (the registry in kernel.h lists them by name).
#pragma once

#include <memory>
#include <span>

#include "attest/kernels/faults.h"
#include "attest/kernels/kernel.h"
#include "attest/kernels/packed.h"

namespace attest {

struct TiledConfig {
  int block_q = 32;     // Br, query rows per tile
  int block_k = 32;     // Bc, keys per tile
  Precision precision;  // the scalar tiled kernel rounds where this says (and declares it)
  // A split-KV path for decode-shaped calls (B = 1, Tq <= 4, Tk >= 512), reported as "split-kv";
  // with declare_paths the kernel declares its paths (ABI 2.2) instead of leaving them to discovery.
  bool split_kv = false;
  bool declare_paths = false;
};

std::unique_ptr<Kernel> make_loop_kernel();
// The loop kernel rounding exactly where `emulated` says: the precision gate's model kernel. With a
// key tile, the weight sum and the P.V sum are summed per tile of that many keys, then added, as a
// kernel declaring that tile may (0: one pass over all keys).
std::unique_ptr<Kernel> make_model_kernel(const Precision& emulated, int key_tile = 0);
// The model kernel on query rows `query_rows` of every batch entry and head only (empty: all), the
// rest NaN: gate 2 on a long problem's sampled rows costs those rows, not Tq x Tk.
Outputs run_model_rows(const Precision& emulated, const Problem& p, const std::vector<int>& query_rows);
// Masks as a float mask does: every key scored, then -inf added (additive_mask_kernel.cpp). Not a
// registered built-in: it declares `inputs` as given, honestly only as InputDomain::kMaskedScored;
// max_before_mask takes the row max before the mask (a bug).
std::unique_ptr<Kernel> make_additive_mask_kernel(InputDomain inputs, bool max_before_mask = false);
std::unique_ptr<Kernel> make_blocked_kernel(int block_q = 32);
std::unique_ptr<Kernel> make_tiled_kernel(TiledConfig config = {});
// bf16 Q/K/V/O, f32 scores and accumulator, P rounded to bf16 before P.V (fixed: config.precision
// is not read). kAuto takes the AVX-512 BF16 dot products when the CPU has them; kPortable never
// does (tests reach the other path).
enum class Bf16Path { kAuto, kPortable };
std::unique_ptr<Kernel> make_tiled_bf16_kernel(TiledConfig config = {128, 64}, Bf16Path path = Bf16Path::kAuto);
std::unique_ptr<Kernel> make_decode_kernel(int page_size = 16);
// Decode-only, over a paged cache of 16-token pages holding K and V in `format` (q8, q8_token, q4,
// e4m3 or e5m2: quantized.h), named decode_<format>; no RoPE.
std::unique_ptr<Kernel> make_quantized_decode_kernel(Scalar format);
// Decode-only, evicting: the first `sinks` positions and the `recent` newest kept (16-token pages,
// a ring for the recent ones), declared as CachePolicy::kSinksRecent (kWindow when sinks is 0);
// with `report_positions`, declared kExplicit instead and reporting each query's retained positions.
std::unique_ptr<Kernel> make_sinks_recent_decode_kernel(int sinks = 4, int recent = 32, bool report_positions = false);
// `decoder` declaring itself decode-only (no forward: held to its sessions), as a serving
// library's decoder does.
std::unique_ptr<Kernel> make_decode_only(std::unique_ptr<Kernel> decoder);

// The exact merge of partial states (Kernel::merge), in f32 with the running max subtracted; with
// `faults`, one of the merge mutants.
void merge_states(const MergeInputs& in, std::span<float> o, std::span<float> lse, const KernelFaults& faults = {});

// A float32 forward over a packed varlen batch (Kernel::forward_packed) that reads the packed
// buffers in place; with `faults`, one of the packed-layout mutants.
void packed_forward(const PackedCall& call, std::span<float> o, std::span<float> lse, const KernelFaults& faults = {});

// The same kernels with mutation switches on (for impl/mutants/ only).
std::unique_ptr<Kernel> make_faulty_tiled_kernel(TiledConfig config, const KernelFaults& faults, std::string name);
std::unique_ptr<Kernel> make_faulty_decode_kernel(int page_size, const KernelFaults& faults, std::string name);
std::unique_ptr<Kernel> make_faulty_quantized_decode_kernel(Scalar format, const KernelFaults& faults,
                                                            std::string name);
std::unique_ptr<Kernel> make_faulty_sinks_recent_decode_kernel(int sinks, int recent, bool report_positions,
                                                               const KernelFaults& faults, std::string name);

}  // namespace attest
