// Mutation switches: each field, when set, turns a correct kernel into a realistic broken one.
// The built-in kernels run with every switch off; impl/mutants/ sets one switch per mutant.
// (Mutation schemata: one compiled kernel serves the correct version and all its mutants.)
#pragma once

#include <limits>

namespace attest {

struct KernelFaults {
  // Masking
  bool causal_sees_next = false;      // causal off by one: one future key visible
  bool causal_excludes_self = false;  // causal off by one: the diagonal key masked
  bool causal_top_left = false;       // ignores q_offset: top-left alignment when Tq < Tk
  bool causal_tile_only = false;      // causal used only to skip tiles; the diagonal tile leaks
  bool ignore_key_padding = false;
  bool window_one_wider = false;
  bool chunk_from_query_index = false;  // chunk of query i taken from i, not its position q_offset + i
  bool lookahead_inclusive = false;     // j - qpos <= a (FlashAttention's right window read as ours): one key too many
  bool batch0_padding_for_all = false;  // kv_valid[0] used for every batch
  bool mask_after_softmax = false;      // masked keys zeroed after normalization
  // Online softmax
  bool drop_partial_tile = false;   // the last, partial key tile is skipped
  bool no_rescale = false;          // accumulator not rescaled when the running max grows
  bool no_max_subtraction = false;  // exp(s) instead of exp(s - m): overflows
  float masked_sentinel = -std::numeric_limits<float>::infinity();  // e.g. -1e4 instead of -inf
  float initial_max = -std::numeric_limits<float>::infinity();      // running max starts here
  bool max_over_masked = false;                                     // running max taken over masked logits too
  // Heads, values, rows
  bool gqa_modulo = false;               // kv head h % Hkv instead of h / (H / Hkv)
  bool masked_value_times_zero = false;  // masked V rows multiplied by weight 0 (0 * NaN)
  bool empty_row_nan = false;            // empty rows divide 0 by 0
  bool lse_without_max = false;          // LSE = log(sum) without the max term
  // Score modifiers
  bool alibi_kv_head = false;           // ALiBi slope of the kv head h / (H / Hkv), not of query head h
  bool alibi_distance_flipped = false;  // slope * (qpos - j) instead of slope * (j - qpos)
  bool softcap_after_mask = false;      // masked scores set to -inf, then capped: a masked key gets -c
  bool softcap_naive_tanh = false;      // tanh as (e^2y - 1) / (e^2y + 1): inf / inf = NaN past y = 44
  bool bias_batch0 = false;             // batch 0's bias read for every batch (a per-batch bias taken as broadcast)
  bool bias_inf_as_lowest = false;      // a -inf bias replaced by the lowest float (a finfo.min mask): not a mask
  bool bias_in_f16 = false;             // the bias rounded to f16 (an additive mask kept in half precision)
  bool sink_outside_max = false;        // the sink joins the sum at the end, not the running max
  bool sink_per_key_tile = false;       // every key tile's partial state starts with the sink (split-KV merge)
  // Decode
  bool decode_skips_self = false;           // a new token does not attend to itself
  bool decode_page_off_by_one = false;      // the last key of each page is skipped
  bool q8_scale_next_block = false;         // a quantized cache reads each block's scale from the block after it
  bool q4_nibbles_swapped = false;          // a q4 cache writes each pair of codes high nibble first
  bool e4m3_saturated_as_inf = false;       // an e4m3 cache reads the saturated code (448) as infinity
  bool page_table_off_by_one = false;       // logical page p read through the block table's entry p + 1
  bool decode_drops_partial_page = false;   // the sequence's last page is skipped while it is not full
  bool q8_head_scale_of_next_head = false;  // q8_head: kv head g's rows quantized with kv head g + 1's static scale
  bool paged_writes_through_first_table =
      false;                            // block tables: every sequence's new tokens written through sequence
                                        // 0's table where it reaches (into a page shared with, or owned by, another)
  bool paged_pages_contiguous = false;  // block tables: a sequence's pages taken as consecutive from its first
  bool paged_positions_of_first_sequence = false;  // block tables: every sequence's new tokens placed at sequence 0's
                                                   // length (one cache position for the batch), its keys cut there
  bool paged_one_token_steps_at_longest = false;   // block tables: in a call where every sequence adds one token
                                                   // (the usual serving step), each reads to the batch's longest
                                                   // length, as a padded seqlens_k would (padding read as keys)
  bool paged_table_of_eight = false;     // block tables: the kernel's copy of a table holds 8 entries (reads past
                                         // 128 tokens go through entry 7)
  bool paged_table_of_256 = false;       // block tables: the kernel's copy of a table holds 256 entries (reads
                                         // past 4096 tokens go through entry 255: long sessions only)
  bool eviction_fencepost = false;       // sinks + recent: one key more than `recent` kept (p - j <= recent)
  bool ring_wrap_current_lap = false;    // sinks + recent: only the ring's current lap read; the previous lap's
                                         // tail, still recent, taken as evicted
  bool sinks_evicted = false;            // sinks + recent: the sinks dropped once the cache is full
  bool sinks_evicted_from_150 = false;   // sinks + recent: the sinks dropped from position 150 on (a later refill)
  bool sinks_evicted_from_5000 = false;  // sinks + recent: the sinks dropped from position 5000 on (long sessions only)
  bool finite_max_sentinel =
      false;  // the running max starts at -10000, not -inf: rows whose logits are all below it divide 0 by 0
  bool rope_query_at_zero = false;  // queries rotated at 0 + i, ignoring their position
  // Memory
  bool accumulate_into_output = false;  // reads O before writing it
  bool read_past_keys = false;          // reads one key row past Tk
  bool write_past_output = false;       // writes one float past O
  // Precision
  bool weights_to_fp16 = false;   // P rounded to fp16 before P.V
  bool fp16_accumulator = false;  // P.V accumulated in fp16
  bool scale_to_bf16 = false;     // the scale rounded to bf16
  bool scale_inverse_dk = false;  // 1/Dk instead of 1/sqrt(Dk)
  bool scale_from_dv = false;     // 1/sqrt(Dv) instead of 1/sqrt(Dk)
  // Precision (kernels with 16-bit storage)
  bool p_below_declaration = false;         // P rounded to 4 significant bits (an fp8 format) while declaring bf16
  bool flush_below_2e_100 = false;          // declares flushed subnormals, but zeroes weights below 2^-100 (normal)
  bool f16_accumulator_multi_tile = false;  // P.V accumulated in f16 on the multi-tile path only, declaring f32
  bool o_truncated = false;                 // O converted to its storage by truncation, not round to nearest even
  bool scale_in_storage = false;            // the scale folded into Q, rounded to Q's storage format
  bool k_as_f16 = false;                    // K kept as f16 (max 65504) while declaring bf16 storage
  bool lse_in_storage = false;              // LSE rounded to the storage format
  // Production shapes: bugs in one cell of the coverage model only
  bool dk128_drops_last_lane = false;       // Dk == 128: the unrolled dot product misses the last coordinate
  bool kv_head_table_of_8 = false;          // H > 8: the kv head looked up for query head h % 8
  bool head_dim_48_off = false;             // Dk = 48 only (a width no listed class has): outputs 0.1% off
  bool heads_and_batch_off = false;         // H > 8 and B > 4 together only: outputs 0.1% off
  bool paths_named_by_shape = false;        // reports 17 path names hashed from the shape, not its code paths
  bool batch_table_of_4 = false;            // B > 4: K and V of batch b % 4 (a 4-entry batch pointer table)
  bool wide_path_unmasked_softcap = false;  // a "wide" path (Tq >= 64, Dv % 16 == 0): with a softcap and no mask term
                                            // at all, the last partial key tile is dropped
  bool sinks_drop_partial_tile =
      false;  // with sinks, the last partial key tile is dropped (the sink's slot ends the tile)
  bool split_kv_drops_remainder = false;   // a split-KV path (B = 1, Tq <= 4, Tk >= 512, splits of 256 keys) drops the
                                           // keys past the last whole split
  bool split_kv_for_tq_8 = false;          // the split-KV path taken up to Tq = 8 while declaring Tq <= 4
  bool dv_beyond_dk_zero = false;          // Dv > Dk: O's columns past Dk are written as 0 (an output loop over Dk)
  bool decode_window_evicts_page = false;  // decode with a window: a page is evicted as soon as its first key
                                           // leaves the window (its later keys, still inside, are lost)
  // Backward (docs/design.md#backward; the tiled backward of backward_kernels.cpp)
  bool backward_drops_d = false;             // dS = P * dP: the D = rowsum(dO * O) term dropped
  bool backward_d_from_bf16_o = false;       // D from O rounded to bf16 (a 16-bit copy of O kept for the backward)
  bool backward_dk_unscaled = false;         // dK not multiplied by the softmax scale
  bool backward_gqa_last_head_wins = false;  // dK, dV of a kv head stored per query head: the group's last head wins
  bool backward_masked_ds_kept = false;      // dS from P recomputed without the mask (the mask applied to dV's P only)
  bool backward_softcap_no_derivative = false;  // the softcap's 1 - tanh^2 factor missing from dS
  bool backward_dq_nondeterministic =
      false;  // dQ accumulated over key tiles in an order that changes per call (atomics)
  bool backward_dq_split_by_threads = false;  // dQ summed per worker over its share of the key tiles (split-K), then
                                              // the shares added: the order follows the thread count
  bool backward_dq_split_from_four_threads = false;  // the same split, only at 4 or more workers
  bool backward_dq_wrong_when_threaded = false;      // dQ 1% off whenever a thread count is given (threads != 0)
  bool backward_dq_wrong_past_512 = false;           // dQ 1% off when Tk > 512 (past four 128-key tiles)
  bool backward_dq_wrong_past_2048 = false;          // dQ 1% off when Tk > 2048 (past the size ladder's backward)
  bool backward_dk_wrong_rect_past_2048 = false;     // dK 1% off when Tq != Tk and Tk > 2048 (a cross-attention path)
  bool backward_dv_wrong_padded_past_2048 = false;   // dV 1% off in a batch entry with padded keys when Tk > 2048
  bool backward_lse_wrong_row = false;               // P recomputed with the LSE of the next row of the query tile
  bool backward_dv_unnormalised = false;             // dV from exp(s - rowmax) instead of exp(s - LSE): unnormalised P
  bool backward_sink_gradient_sign = false;          // dsinks = +sum p_sink D instead of -sum p_sink D
  bool backward_skipped_rows_unwritten =
      false;  // dQ zeroed only for rows that see a key: an empty row's dQ never written
  // Merging partial states (Kernel::merge)
  bool merge_reads_empty_part = false;  // an empty part's O weighted by 0, not skipped: 0 * NaN
  bool merge_without_max = false;       // weights exp(lse_i), not exp(lse_i - max): overflows past lse 88
  bool merge_lse_bf16 = false;          // the partial LSEs read as bf16
  bool split_lse_log2 = false;          // the forward's LSE left in base 2 (log2 e x lse): split states mis-weighted
  // The packed varlen layout (Kernel::forward_packed)
  bool packed_drops_last_sequence = false;   // sequences 0 .. B - 2 only: the last one's rows never written
  bool packed_next_offset = false;           // sequence b's keys from cu_seqlens_k[b + 1]: the next one's
  bool packed_max_seqlen_as_length = false;  // every sequence max_seqlen_k keys long: reads the next one's
  // Sizes: bugs only past the first tiles
  bool third_key_tile_stale = false;        // double-buffered K: the third key tile scores the first tile's keys
  bool query_tile_local_positions = false;  // a row's mask position from its index within its query tile
};

// Whether any backward switch is on.
inline bool backward_fault(const KernelFaults& f) {
  return f.backward_drops_d || f.backward_d_from_bf16_o || f.backward_dk_unscaled || f.backward_gqa_last_head_wins ||
         f.backward_masked_ds_kept || f.backward_softcap_no_derivative || f.backward_dq_nondeterministic ||
         f.backward_dq_split_by_threads || f.backward_dq_split_from_four_threads || f.backward_dq_wrong_when_threaded ||
         f.backward_dq_wrong_past_512 || f.backward_dq_wrong_past_2048 || f.backward_dk_wrong_rect_past_2048 ||
         f.backward_dv_wrong_padded_past_2048 || f.backward_lse_wrong_row || f.backward_dv_unnormalised ||
         f.backward_sink_gradient_sign || f.backward_skipped_rows_unwritten;
}

// Whether any merge switch is on.
inline bool merge_fault(const KernelFaults& f) {
  return f.merge_reads_empty_part || f.merge_without_max || f.merge_lse_bf16 || f.split_lse_log2;
}

// Whether any packed-layout switch is on.
inline bool packed_fault(const KernelFaults& f) {
  return f.packed_drops_last_sequence || f.packed_next_offset || f.packed_max_seqlen_as_length;
}

}  // namespace attest
