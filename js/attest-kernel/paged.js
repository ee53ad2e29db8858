// One block-table call (ABI 2.4's DECODE_PAGED, attest_abi.h's attest_paged_step) as a JS decoder
// receives it: attest owns the pages and the tables; the kernel writes its new tokens' slots into
// `pool` (its own layout, pageBytes a page) and attends each new query causally over its sequence.
// Position t of sequence b lives in slot t % pageTokens of page tables[b * tableWidth + t / pageTokens].
import { arrayType } from "./storage.js";
import { ProtocolError } from "./wire.js";

export class PagedStep {
  /** fields: decodePagedStep's; config: the DecodeConfig; storage: q, k, v formats. */
  constructor(fields, config, pageTokens, storage) {
    Object.assign(this, { config, pageTokens, storage });
    this.pageBytes = fields.page_bytes;
    this.pool = fields.pool; // a copy: what the kernel writes here goes back to attest
    this.tableWidth = fields.table_width;
    this.tables = fields.tables;
    this.lengths = Array.from(fields.lengths, Number); // tokens sequence b held before the call
    this.counts = fields.counts; // tokens sequence b appends now (0 or more): a ragged batch
    this.wantLse = fields.want_lse;
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

  /** Values in sequence b's new [heads][n][width] block of q, k or v. */
  #size(name, b) {
    const c = this.config;
    return (name === "q" ? c.heads : c.kv_heads) * this.counts[b] * (name === "v" ? c.value_dim : c.head_dim);
  }

  #check() {
    const c = this.config;
    if (this.pageBytes < 1 || this.pool.length % this.pageBytes) throw new ProtocolError("paged step: the pool is not whole pages");
    if (this.tables.length !== c.batch * this.tableWidth || this.counts.length !== c.batch || this.lengths.length !== c.batch) {
      throw new ProtocolError("paged step: tables, lengths and counts do not match the batch");
    }
    for (const name of ["q", "k", "v"]) {
      const bytes = this.offsets[name][c.batch] * arrayType(this.storage[name]).BYTES_PER_ELEMENT;
      if (this.raw[name].length !== bytes) throw new ProtocolError(`paged step: ${name} does not match the counts and the configuration`);
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
   * their storage formats (Float32Array, or Uint16Array bit patterns), empty when counts[b] is 0. */
  sequence(b) {
    const out = { n: this.counts[b] };
    for (const name of ["q", "k", "v"]) {
      const Type = arrayType(this.storage[name]);
      const raw = this.raw[name];
      const from = this.offsets[name][b], count = this.offsets[name][b + 1] - from;
      out[name] = new Type(raw.buffer, raw.byteOffset + from * Type.BYTES_PER_ELEMENT, count);
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
