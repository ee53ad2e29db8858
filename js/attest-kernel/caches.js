// ABI 2.4's serving caches on the kernel's side: DECODE_RETAINED (an explicit cache names the
// positions a query attended), PAGE_BYTES and DECODE_PAGED (block tables: attest owns the pages, a
// ragged batch appends counts[b] tokens to sequence b). Methods of Server (server.js mixes them in).
import * as messages from "./messages.js";
import { PagedStep } from "./paged.js";
import { DecodeConfig } from "./problem.js";
import { OutputError, STATUS, cut, describe, pathOf } from "./server.js";
import { ProtocolError, TYPES } from "./wire.js";

/** An i64 list of positions from what retained(b, t) returned, at most `capacity` of them. */
function positionsOf(value, capacity) {
  if (value == null || typeof value !== "object" || typeof value.length !== "number") throw new OutputError(`${String(value)} is not a list`);
  if (value.length > capacity) throw new OutputError(`${value.length} positions (capacity ${capacity})`);
  return BigInt64Array.from(value, (x) => {
    if (!Number.isInteger(Number(x))) throw new OutputError(`position ${String(x)} is not an integer`);
    return BigInt(x);
  });
}

export const cacheHandlers = {
  async decodeRetained(r) {
    const [number, b, t] = [r.u64(), r.i32(), r.i32()];
    r.expectEnd();
    const entry = this.sessions.get(number);
    if (!entry) throw new ProtocolError("retained positions of an unknown session");
    if (b < 0 || b >= entry.config.batch || t < 0 || t >= entry.last) {
      throw new ProtocolError("retained positions of a query outside the session's last step");
    }
    const capacity = entry.length - entry.last + t + 1; // a query at position p attends at most p + 1 positions
    let [status, error, positions] = [STATUS.unsupported, "the session has no retained(b, t)", null];
    if (typeof entry.session.retained === "function") {
      ({ status, error, result: positions } = await this.call(() => entry.session.retained(b, t), "the session's retained"));
    }
    if (status === STATUS.ok) {
      try {
        positions = positionsOf(positions, capacity);
      } catch (e) {
        [status, error, positions] = [STATUS.internal_error, cut(`retained(${b}, ${t}) returned ${e.message}`), null];
      }
    }
    this.channel.writeFrame(TYPES.RETAINED, messages.encodeRetained(status, error, positions));
  },

  /** {status, error, result: bytes} of the declaration's page_bytes(config), checked. */
  async ownPageBytes(config) {
    const call = await this.call(() => this.declaration.page_bytes(config), "page_bytes");
    if (call.status === STATUS.ok && !(Number.isSafeInteger(call.result) && call.result >= 1)) {
      return { status: STATUS.internal_error, error: `page_bytes returned ${String(call.result)}, not a positive integer`, result: 0 };
    }
    return call;
  },

  async pageBytes(r) {
    const config = new DecodeConfig(messages.decodeDecodeOpen(r, true), this.declaration);
    r.expectEnd();
    let reply = { status: STATUS.unsupported, error: "no block tables (page_tokens 0)", result: 0 };
    if (this.declaration.page_tokens) reply = await this.ownPageBytes(config);
    this.channel.writeFrame(TYPES.PAGE_BYTES_RESULT, messages.encodePageBytesResult(reply.status, reply.error, reply.result ?? 0));
  },

  async decodePaged(r) {
    if (!this.declaration.page_tokens) throw new ProtocolError("DECODE_PAGED to a kernel without block tables");
    const config = new DecodeConfig(messages.decodeDecodeOpen(r, true), this.declaration);
    const fields = messages.decodePagedStep(r);
    const own = await this.ownPageBytes(config);
    if (own.status !== STATUS.ok || own.result !== fields.page_bytes) {
      throw new ProtocolError(`DECODE_PAGED with pages of ${fields.page_bytes} bytes; the kernel's are ${own.result ?? "unknown"}`);
    }
    const step = new PagedStep(fields, config, this.declaration.page_tokens, this.declaration.precision);
    const call = await this.call(() => this.declaration.decode_paged(config, step), "decode_paged");
    let reply = { status: call.status, error: call.error, pool: step.pool };
    if (call.status === STATUS.ok) {
      try {
        reply = { ...reply, ...this.pagedOutputs(config, step, call.result) };
      } catch (e) {
        reply = { ...reply, status: STATUS.internal_error, error: cut(e instanceof OutputError ? e.message : describe(e)) };
      }
    }
    this.channel.writeFrame(TYPES.DECODE_PAGED_RESULT, messages.encodeDecodePagedResult(reply));
  },

  /** {o, lse, path} of the whole call from decode_paged's {o: [...], lse: [...], path}: one entry per
   * sequence (anything, null included, for a sequence with no new token), concatenated. */
  pagedOutputs(c, step, result) {
    const wantLse = step.wantLse;
    if (result == null || typeof result !== "object" || !Array.isArray(result.o)) {
      throw new OutputError("decode_paged returned no {o: [one o per sequence], lse, path}");
    }
    if (result.o.length !== c.batch || (wantLse && (!Array.isArray(result.lse) || result.lse.length !== c.batch))) {
      throw new OutputError(`decode_paged returned o${wantLse ? " or lse" : ""} for other than the batch's ${c.batch} sequences`);
    }
    const format = this.declaration.precision.o;
    const oParts = [], lseParts = [];
    for (let b = 0; b < c.batch; b++) {
      const n = step.counts[b];
      if (n === 0) continue;
      oParts.push(this.output(result.o[b], format, c.heads * n * c.value_dim, `o[${b}]`, "[H][n][Dv]"));
      if (wantLse) lseParts.push(this.output(result.lse[b], "f32", c.heads * n, `lse[${b}]`, "[H][n]"));
    }
    const join = (parts, Type) => {
      const out = new Type(parts.reduce((sum, p) => sum + p.length, 0));
      let at = 0;
      for (const p of parts) { out.set(p, at); at += p.length; }
      return out;
    };
    return { path: pathOf(result.path), o: join(oParts, format === "f32" ? Float32Array : Uint16Array),
      lse: wantLse ? join(lseParts, Float32Array) : null };
  },
};
