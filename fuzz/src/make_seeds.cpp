// Writes the seed corpus: small, meaningful inputs per target, each named for what it holds.
// Usage: fuzz_make_seeds CORPUS_DIR   (writes CORPUS_DIR/<target>/<name>)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_input.h"

namespace {

using attest::fuzz::Controls;
using attest::fuzz::Flavor;
namespace flag = attest::fuzz;

struct Seed {
  std::string target;
  std::string name;
  Flavor flavor;
  Controls controls;
};

Controls shape(int batch, int head_config, int tq, int tk, int dk, int dv, std::uint16_t flags) {
  Controls c;
  c.batch = batch, c.head_config = head_config, c.q_len = tq, c.k_len = tk, c.head_dim = dk, c.value_dim = dv;
  c.flags = flags;
  c.kv_valid.assign(batch, tk);
  c.q_valid.assign(batch, tq);
  c.window = 3;
  return c;
}

template <typename F>
Controls with(Controls c, F edit) {
  edit(c);
  return c;
}

// An extended input (flag::kExtended): lengths named by tile edges of the kernel replaying it
// (tile_edge_pick(m, delta) is m * tile + delta on each kernel) and the score modifiers in
// `modifiers` (flag::Extended bits), drawn on the kernels that declare them.
Controls extended(Controls c, int q_size, int k_size, std::uint8_t modifiers) {
  c.flags |= flag::kExtended;
  c.q_size = q_size, c.k_size = k_size;
  c.extended = modifiers;
  c.kv_valid_size.assign(c.batch, 0);  // padding lengths: the basic ones, scaled
  c.q_valid_size.assign(c.batch, 0);
  c.softcap = 128;                                        // c = 100
  c.slope_exponent = 160, c.slope_kinds = 0b11'10'01'00;  // magnitude 1/2: 0, +geometric, -geometric, +1/2
  c.bias_exponent = 51, c.bias_minus_inf = 32;            // |bias| < 1, one entry in eight -inf
  c.bias_seed = 0x5eed;
  c.sink_exponent = 128, c.sink_kinds = 0b01'10'01'10;  // +-10
  return c;
}
using flag::tile_edge_pick;

// One seed per integer mask term of the feature table, alone (together, one term can hide
// another's bug: a chunk cuts off the key a lookahead bug would show), named after the term.
std::vector<Seed> integer_term_seeds() {
  std::vector<Seed> out;
  const auto& terms = attest::integer_mask_terms();
  for (std::size_t k = 0; k < terms.size(); ++k)
    out.push_back({"fuzz_mask_leak", std::string("ext_") + terms[k]->name + "_alone", Flavor::kMasks,
                   with(extended(shape(2, 2, 9, 13, 4, 4, 0), flag::kSmallPick, flag::kSmallPick, flag::kMoreTerms),
                        [k](Controls& c) { c.window = 3, c.integer_terms = 1 << k; })});
  return out;
}

std::vector<Seed> seeds() {
  const Flavor masks = Flavor::kMasks, over = Flavor::kOverflow, dec = Flavor::kDecode, gen = Flavor::kGeneral;
  return {
      {"fuzz_mask_leak", "causal_bottom_right_tq_lt_tk", masks, shape(1, 0, 5, 17, 4, 4, flag::kCausal)},
      {"fuzz_mask_leak", "causal_top_left", masks, shape(1, 0, 5, 17, 4, 4, flag::kCausal | flag::kOffsetTopLeft)},
      {"fuzz_mask_leak", "causal_tq_gt_tk_empty_rows", masks, shape(1, 1, 9, 4, 4, 3, flag::kCausal)},
      {"fuzz_mask_leak", "window_3", masks, shape(1, 0, 12, 12, 4, 4, flag::kWindow | flag::kCausal)},
      {"fuzz_mask_leak", "key_padding_empty_batch", masks,
       with(shape(2, 2, 6, 9, 4, 4, flag::kKeyPadding),
            [](Controls& c) {
              c.kv_valid = {5, 0};
            })},
      {"fuzz_mask_leak", "query_padding", masks,
       with(shape(2, 1, 7, 7, 4, 4, flag::kQueryPadding),
            [](Controls& c) {
              c.q_valid = {3, 7};
            })},
      {"fuzz_mask_leak", "segments", masks,
       with(shape(1, 0, 10, 10, 4, 4, flag::kSegments),
            [](Controls& c) { c.segment_bits = 0x8004'0000'0000'0088ULL; })},
      {"fuzz_mask_leak", "explicit_sparse", masks,
       with(shape(1, 0, 8, 8, 4, 4, flag::kExplicit), [](Controls& c) { c.explicit_density = 200; })},
      {"fuzz_mask_leak", "all_terms_gqa", masks,
       with(shape(2, 4, 17, 33, 8, 4,
                  flag::kCausal | flag::kWindow | flag::kKeyPadding | flag::kQueryPadding | flag::kSegments |
                      flag::kExplicit),
            [](Controls& c) {
              c.kv_valid = {30, 12}, c.q_valid = {17, 5}, c.window = 9, c.explicit_density = 40;
            })},
      {"fuzz_mask_leak", "tile_edge_33_causal", masks, shape(1, 0, 33, 33, 8, 8, flag::kCausal)},
      {"fuzz_overflow", "logits_1e8", over, with(shape(1, 0, 4, 6, 4, 4, 0), [](Controls& c) { c.qk_exponent = 16; })},
      {"fuzz_overflow", "logits_1e8_negative_scale", over,
       with(shape(1, 0, 4, 6, 4, 4, 0), [](Controls& c) { c.qk_exponent = 16, c.scale_choice = 6; })},
      {"fuzz_overflow", "tiny_1e-20", over, with(shape(1, 0, 4, 6, 4, 4, 0), [](Controls& c) { c.qk_exponent = -40; })},
      {"fuzz_overflow", "specials", over,
       with(shape(1, 2, 5, 7, 4, 4, flag::kCausal), [](Controls& c) { c.specials = 200; })},
      {"fuzz_overflow", "huge_values", over, with(shape(1, 0, 3, 5, 2, 3, 0), [](Controls& c) { c.v_exponent = 36; })},
      {"fuzz_overflow", "scale_1e20", over,
       with(shape(1, 0, 3, 5, 2, 2, 0), [](Controls& c) { c.scale_choice = 7, c.qk_exponent = -30; })},
      {"fuzz_decode", "t17_chunks_1_1_15", dec,
       with(shape(1, 2, 17, 17, 4, 4, 0),
            [](Controls& c) {
              c.chunks = {1, 1, 15};
            })},
      {"fuzz_decode", "t33_pages", dec,
       with(shape(1, 0, 33, 33, 4, 4, 0),
            [](Controls& c) {
              c.chunks = {16, 17};
            })},
      {"fuzz_decode", "t40_window_rope", dec,
       with(shape(2, 3, 40, 40, 8, 4, flag::kWindow | flag::kRope),
            [](Controls& c) {
              c.window = 5, c.chunks = {7, 9, 24};
            })},
      {"fuzz_decode", "t5_token_by_token", dec,
       with(shape(1, 4, 5, 5, 2, 6, 0),
            [](Controls& c) {
              c.chunks = {1, 1, 1, 1, 1};
            })},
      {"fuzz_differential", "worked_example_shape", gen, shape(1, 0, 3, 3, 2, 2, flag::kCausal)},
      {"fuzz_differential", "tq1_tk1", gen, shape(1, 0, 1, 1, 1, 1, 0)},
      {"fuzz_differential", "tile_edges_31_33", gen, shape(1, 1, 31, 33, 8, 8, flag::kCausal)},
      {"fuzz_differential", "tile_edges_33_32", gen, shape(1, 1, 33, 32, 8, 8, 0)},
      {"fuzz_differential", "gqa_4_to_1_dk_ne_dv", gen, shape(2, 4, 9, 17, 16, 3, flag::kCausal)},
      {"fuzz_differential", "rope_offset", gen,
       with(shape(1, 2, 6, 20, 8, 8, flag::kRope | flag::kOffsetExplicit), [](Controls& c) { c.q_offset = 40; })},
      {"fuzz_differential", "bf16_inputs", gen, shape(1, 1, 8, 8, 8, 8, flag::kBf16)},
      {"fuzz_differential", "f16_inputs_window", gen, shape(1, 1, 8, 16, 8, 8, flag::kF16 | flag::kWindow)},
      // Extended inputs: second tiles (on builtin:tiled 257 x 129, on the 32x32 mutants 65 x 65) and modifiers.
      {"fuzz_differential", "ext_two_tiles_plus_1", gen,
       extended(shape(1, 0, 5, 5, 8, 8, 0), tile_edge_pick(2, 1), tile_edge_pick(2, 1), 0)},
      {"fuzz_differential", "ext_tile_edges_minus_1_causal", gen,
       extended(shape(1, 1, 5, 5, 8, 8, flag::kCausal), tile_edge_pick(2, -1), tile_edge_pick(1, -1), 0)},
      {"fuzz_differential", "ext_query_tile_exact_keys_long", gen,
       extended(shape(1, 0, 5, 5, 4, 4, flag::kCausal | flag::kOffsetTopLeft), tile_edge_pick(1, 0),
                tile_edge_pick(2, 0), 0)},
      {"fuzz_differential", "ext_softcap_30_logits_1e4", gen,
       with(extended(shape(1, 2, 9, 17, 8, 8, flag::kCausal), flag::kSmallPick, tile_edge_pick(1, 1), flag::kSoftcapOn),
            [](Controls& c) { c.softcap = 94, c.qk_exponent = 8; })},
      {"fuzz_differential", "ext_alibi_mixed_signs_gqa_4_to_1", gen,
       extended(shape(1, 4, 17, 33, 8, 8, flag::kCausal), flag::kSmallPick, tile_edge_pick(1, 1), flag::kAlibiOn)},
      {"fuzz_differential", "ext_bias_broadcast_over_batch_minus_inf", gen,
       extended(shape(2, 3, 7, 9, 4, 4, 0), tile_edge_pick(1, 1), tile_edge_pick(2, 1),
                flag::kBiasOn | flag::kBiasPerHead)},
      {"fuzz_differential", "ext_bias_mostly_minus_inf_with_sinks", gen,
       with(extended(shape(1, 2, 8, 8, 4, 4, 0), flag::kSmallPick, tile_edge_pick(1, 0),
                     flag::kBiasOn | flag::kBiasPerBatch | flag::kBiasPerHead | flag::kSinksOn),
            [](Controls& c) { c.bias_minus_inf = 250; })},
      {"fuzz_differential", "ext_sinks_plus_minus_1e4", gen,
       with(extended(shape(1, 6, 6, 11, 4, 4, flag::kCausal), flag::kSmallPick, flag::kSmallPick, flag::kSinksOn),
            [](Controls& c) { c.sink_exponent = 255, c.sink_kinds = 0b11'10'01'10; })},
      {"fuzz_differential", "ext_all_modifiers_second_tiles", gen,
       extended(shape(1, 2, 5, 5, 8, 8, flag::kCausal), tile_edge_pick(2, 1), tile_edge_pick(2, -1),
                flag::kSoftcapOn | flag::kAlibiOn | flag::kBiasOn | flag::kSinksOn)},
      {"fuzz_mask_leak", "ext_padding_at_key_tile_edge", masks,
       with(extended(shape(2, 2, 5, 5, 4, 4, flag::kKeyPadding | flag::kCausal), tile_edge_pick(1, 1),
                     tile_edge_pick(2, 1), 0),
            [](Controls& c) {
              c.kv_valid_size = {tile_edge_pick(1, 0), tile_edge_pick(1, 1)};
            })},
      {"fuzz_mask_leak", "ext_window_one_tile_wide_long", masks,
       with(extended(shape(1, 0, 5, 5, 4, 4, flag::kWindow | flag::kCausal), tile_edge_pick(2, 1), tile_edge_pick(2, 1),
                     0),
            [](Controls& c) { c.window_size = tile_edge_pick(1, 1); })},
      // Window, chunk and lookahead together, all 5 keys wide (the bits of the terms known when it was
      // written, so that a later term leaves it as it is).
      {"fuzz_mask_leak", "ext_window_chunk_lookahead_long", masks,
       with(extended(shape(1, 0, 5, 5, 4, 4, 0), tile_edge_pick(1, 1), tile_edge_pick(2, 1), flag::kMoreTerms),
            [](Controls& c) { c.window = 5, c.integer_terms = 0b111; })},
      {"fuzz_mask_leak", "ext_bias_minus_inf_with_masks", masks,
       with(extended(shape(2, 4, 9, 17, 4, 4, flag::kCausal | flag::kKeyPadding), flag::kSmallPick,
                     tile_edge_pick(1, 1), flag::kBiasOn | flag::kBiasPerBatch | flag::kAlibiOn | flag::kSinksOn),
            [](Controls& c) {
              c.kv_valid = {12, 17}, c.bias_minus_inf = 96;
            })},
      {"fuzz_overflow", "ext_softcap_1_logits_1e8", over,
       with(extended(shape(1, 0, 4, 6, 4, 4, 0), flag::kSmallPick, flag::kSmallPick, flag::kSoftcapOn),
            [](Controls& c) { c.softcap = 0, c.qk_exponent = 16; })},
      {"fuzz_overflow", "ext_alibi_slope_4_long", over,
       with(extended(shape(1, 2, 4, 6, 4, 4, flag::kCausal), flag::kSmallPick, tile_edge_pick(2, 1), flag::kAlibiOn),
            [](Controls& c) { c.slope_exponent = 255; })},
      // The backward: masks with empty rows, GQA, the modifiers' derivatives, key tiles past the first.
      {"fuzz_backward", "causal_gqa_4_to_1_empty_rows", gen, shape(2, 4, 9, 5, 8, 4, flag::kCausal)},
      {"fuzz_backward", "padding_and_segments", gen,
       with(shape(2, 2, 7, 9, 4, 4, flag::kKeyPadding | flag::kQueryPadding | flag::kSegments),
            [](Controls& c) {
              c.kv_valid = {6, 0}, c.q_valid = {7, 3}, c.segment_bits = 0x8004'0000'0000'0088ULL;
            })},
      {"fuzz_backward", "rope_offset_window", gen,
       with(shape(1, 2, 6, 20, 8, 8, flag::kRope | flag::kOffsetExplicit | flag::kWindow),
            [](Controls& c) { c.q_offset = 14, c.window = 6; })},
      {"fuzz_backward", "ext_softcap_sinks_second_key_tile", gen,
       with(extended(shape(1, 2, 9, 17, 8, 8, flag::kCausal), flag::kSmallPick, tile_edge_pick(1, 1),
                     flag::kSoftcapOn | flag::kSinksOn),
            [](Controls& c) { c.softcap = 94, c.qk_exponent = 4; })},
      {"fuzz_backward", "ext_alibi_bias_minus_inf", gen,
       with(extended(shape(2, 2, 7, 9, 4, 4, 0), flag::kSmallPick, tile_edge_pick(1, 1),
                     flag::kAlibiOn | flag::kBiasOn | flag::kBiasPerHead),
            [](Controls& c) { c.bias_minus_inf = 96; })},
      {"fuzz_decode", "ext_t33_softcap_slopes_sinks", dec,
       with(extended(shape(1, 4, 5, 5, 4, 4, 0), flag::kSmallPick, tile_edge_pick(2, 1),
                     flag::kSoftcapOn | flag::kAlibiOn | flag::kSinksOn),
            [](Controls& c) {
              c.chunks = {1, 15, 2, 16};
            })},
  };
}

std::vector<Seed> all_seeds() {
  std::vector<Seed> out = seeds();
  for (Seed& s : integer_term_seeds()) out.push_back(std::move(s));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR\n");
    return 2;
  }
  const std::vector<Seed> all = all_seeds();
  for (const Seed& s : all) {
    const std::filesystem::path dir = std::filesystem::path(argv[1]) / s.target;
    std::filesystem::create_directories(dir);
    const std::vector<std::uint8_t> bytes = attest::fuzz::encode_input(s.controls, {}, s.flavor);
    std::ofstream(dir / s.name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  std::printf("wrote %zu seeds\n", all.size());
  return 0;
}
