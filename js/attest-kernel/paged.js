// One block-table call (ABI 2.4's DECODE_PAGED, attest_abi.h's attest_paged_step) as a JS decoder
// receives it: attest owns the pages and the tables; the kernel writes its new tokens' slots into
// `pool` (its own layout, pageBytes a page) and attends each new query causally over its sequence.
// Position t of sequence b lives in slot t % pageTokens of page tables[b * tableWidth + t / pageTokens].
import { LAYOUTS } from "./interface.js";
import { storageArray } from "./messages.js";
import { isQuantized, storedSize } from "./quantized.js";
import { arrayType } from "./storage.js";
import { ProtocolError } from "./wire.js";

// The paged_step fields (the table's layout, read in its order by messages.decodePagedStep) and what
// each becomes here; test/paged.test.js fails when the table's layout names a field not in this list.
export const FIELDS = {
  page_bytes: "pageBytes", pool: "pool", table_width: "tableWidth", tables: "tables", lengths: "lengths",
  counts: "counts", want_lse: "wantLse", q: "q", k: "k", v: "v",
};

export class PagedStep {
  /** fields: decodePagedStep's; config: the DecodeConfig; storage: q, k, v formats. */
  constructor(fields, config, pageTokens, storage) {
    Object.assign(this, { config, pageTokens, storage });
    for (const [, name] of LAYOUTS.paged_step) {
      if (!(name in FIELDS)) throw new ProtocolError(`paged step: the table's field ${name} is not read by paged.js`);
    }
    // pool: a copy; what the kernel writes there goes back to attest. lengths: tokens sequence b
    // held before the call; counts: tokens it appends now (0 or more: a ragged batch).
    for (const [name, own] of Object.entries(FIELDS)) if (!["q", "k", "v"].includes(name)) this[own] = fields[name];
    this.lengths = Array.from(this.lengths, Number);
    this.raw = { q: fields.q, k: fields.k, v: fields.v };
    this.offsets = {};
    for (const name of ["q", "k", "v"]) {
      const offsets = [0];
      for (let b = 0; b < config.batch; b++) offsets.push(offsets[b] + this.#size(name, b));
      this.offsets[name] = offsets;
    }
    this.#check();
  }

  get pages() { return this.pool.length / this.pageBytes; }

  /** Sequence b's new [heads][n][width] block of q, k or v. */
  #shape(name, b) {
    const c = this.config;
    return [name === "q" ? c.heads : c.kv_heads, this.counts[b], name === "v" ? c.value_dim : c.head_dim];
  }

  /** Bytes of that block in its storage format (a q8_head block: codes alone). */
  #size(name, b) {
    const format = this.storage[name], shape = this.#shape(name, b);
    if (isQuantized(format)) return storedSize(format, shape, format === "q8_head");
    return shape.reduce((x, y) => x * y, 1) * arrayType(format).BYTES_PER_ELEMENT;
  }

  #check() {
    const c = this.config;
    if (this.pageBytes < 1 || this.pool.length % this.pageBytes) throw new ProtocolError("paged step: the pool is not whole pages");
    if (this.tables.length !== c.batch * this.tableWidth || this.counts.length !== c.batch || this.lengths.length !== c.batch) {
      throw new ProtocolError("paged step: tables, lengths and counts do not match the batch");
    }
    for (const name of ["q", "k", "v"]) {
      if (this.raw[name].length !== this.offsets[name][c.batch]) throw new ProtocolError(`paged step: ${name} does not match the counts and the configuration`);
      if (this.storage[name] === "q8_head" && c[`${name}_scales`] === null) throw new ProtocolError(`paged step: q8_head ${name} without its static scales`);
    }
    for (let b = 0; b < c.batch; b++) {
      if (this.counts[b] < 0 || this.lengths[b] < 0) throw new ProtocolError(`paged step: sequence ${b} has a negative length or count`);
      const used = Math.ceil((this.lengths[b] + this.counts[b]) / this.pageTokens);
      if (used > this.tableWidth) throw new ProtocolError(`paged step: sequence ${b}'s table is too narrow`);
      for (let e = 0; e < used; e++) {
        const page = this.tables[b * this.tableWidth + e];
        if (page < 0 || page >= this.pages) throw new ProtocolError(`paged step: sequence ${b}'s table names a page outside the pool`);
      }
    }
  }

  /** Sequence b's new tokens {q [H][n][Dk], k [Hkv][n][Dk], v [Hkv][n][Dv], n}, typed arrays in
   * their storage formats (Float32Array, or Uint16Array bit patterns; quantized K/V as QuantizedRows,
   * q8_head with sequence b's configured scales), empty when counts[b] is 0. */
  sequence(b) {
    const out = { n: this.counts[b] };
    const c = this.config;
    for (const name of ["q", "k", "v"]) {
      const format = this.storage[name], raw = this.raw[name];
      const from = this.offsets[name][b], to = this.offsets[name][b + 1];
      const scales = format === "q8_head" ? c[`${name}_scales`].subarray(b * c.kv_heads, (b + 1) * c.kv_heads) : null;
      out[name] = storageArray(raw.subarray(from, to), format, this.#shape(name, b), `paged ${name}`, scales);
    }
    return out;
  }

  /** [page, slot]: where position `position` of sequence b lives. */
  slot(b, position) {
    return [this.tables[b * this.tableWidth + Math.floor(position / this.pageTokens)], position % this.pageTokens];
  }

  /** The pool as a Float32Array view (a kernel keeping f32 rows in its pages writes through it). */
  float32() { return new Float32Array(this.pool.buffer, this.pool.byteOffset, Math.floor(this.pool.length / 4)); }
}
