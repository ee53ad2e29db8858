// The kernel's side of the protocol: the channel named by ATTEST_PROTOCOL_FDS and the serve loop
// turning requests into calls of the kernel and its results (or exceptions) into replies. An
// exception in the kernel is a status; a malformed request is an ERROR frame; nothing hangs.
import fs from "node:fs";
import { STATUSES, VERSION as TABLE_VERSION } from "./interface.js";
import * as messages from "./messages.js";
import { PackedProblem } from "./packed.js";
import { DecodeConfig, Problem } from "./problem.js";
import { FORMAT_CODES, fromNumbers, SIXTEEN_BIT, toFloat32 } from "./storage.js";
import { cacheHandlers } from "./caches.js";
import { ProtocolError, Reader, TYPES, TYPE_NAMES, VERSION, frameHeader, parseHeader } from "./wire.js";

export const STATUS = Object.fromEntries(Object.entries(STATUSES).map(([name, row]) => [name, row[0]]));
const MAX_MESSAGE = 1000; // attest keeps 1 KiB of an error

/** Thrown by a kernel to answer UNSUPPORTED (a failure when the problem is inside the declaration). */
export class Unsupported extends Error { get status() { return STATUS.unsupported; } }
/** Thrown by a kernel to answer INVALID_ARGUMENT. */
export class InvalidArgument extends Error { get status() { return STATUS.invalid_argument; } }
class OutputError extends Error {}

const cut = (text) => (Buffer.byteLength(text) <= MAX_MESSAGE ? text : Buffer.from(text).subarray(0, MAX_MESSAGE - 3).toString() + "...");

/** Frames over a pair of file descriptors, read and written synchronously. */
export class Channel {
  constructor(inFd, outFd) { this.inFd = inFd; this.outFd = outFd; }

  #readInto(buffer) {
    let done = 0;
    while (done < buffer.length) {
      let n;
      try {
        n = fs.readSync(this.inFd, buffer, done, buffer.length - done, null);
      } catch (e) {
        if (e.code === "EAGAIN") continue; // a non-blocking pipe: wait for the data
        if (e.code === "EOF") return done;
        throw e;
      }
      if (n === 0) return done;
      done += n;
    }
    return done;
  }

  /** {type, payload}, or null at a clean end of input. */
  readFrame() {
    const header = Buffer.alloc(16);
    const got = this.#readInto(header);
    if (got === 0) return null;
    if (got < 16) throw new ProtocolError("input ended inside a frame header");
    const { type, size } = parseHeader(header);
    const payload = Buffer.alloc(size);
    if (this.#readInto(payload) !== size) throw new ProtocolError("input ended inside a message");
    return { type, payload };
  }

  writeFrame(type, payload = Buffer.alloc(0)) {
    for (const data of [frameHeader(type, payload.length), payload]) {
      let done = 0;
      while (done < data.length) {
        try {
          done += fs.writeSync(this.outFd, data, done, data.length - done);
        } catch (e) {
          if (e.code !== "EAGAIN") throw e;
        }
      }
    }
  }
}

/** The channel of ATTEST_PROTOCOL_FDS ("IN,OUT"); run by hand without it, stdin and stdout. */
export function openChannel(env = process.env) {
  const fds = env.ATTEST_PROTOCOL_FDS;
  if (!fds) return new Channel(0, 1);
  const parts = fds.split(",").map(Number);
  if (parts.length !== 2 || parts.some((fd) => !Number.isInteger(fd) || fd < 0)) {
    throw new ProtocolError(`ATTEST_PROTOCOL_FDS=${JSON.stringify(fds)} does not name two descriptors`);
  }
  for (const fd of parts) fs.fstatSync(fd);
  return new Channel(parts[0], parts[1]);
}

function describe(error) {
  if (!(error instanceof Error)) return `thrown: ${String(error)}`;
  const where = (error.stack ?? "").split("\n").slice(1).find((line) => !line.includes("/attest-kernel/server.js"));
  return `${error.name}: ${error.message}` + (where ? ` (${where.trim()})` : "");
}

/** An output as the typed array of its storage format, checked against the length it needs. */
function output(value, format, length, what, layout) {
  if (value == null || typeof value !== "object" || typeof value.length !== "number") {
    throw new OutputError(`${what} is ${value == null ? String(value) : typeof value}, not an array`);
  }
  if (value.length !== length) throw new OutputError(`${what} has ${value.length} values; this problem needs ${layout} = ${length}`);
  if (SIXTEEN_BIT.has(format) && value instanceof Uint16Array) return value;
  for (let i = 0; i < value.length; i++) {
    if (typeof value[i] !== "number") throw new OutputError(`${what}[${i}] is ${typeof value[i]}, not a number`);
  }
  return fromNumbers(value, format);
}

function pathOf(path) {
  if (path == null) return "";
  if (typeof path !== "string" || Buffer.byteLength(path) > 31 || /[\x00-\x1f\x7f]/.test(path)) {
    throw new OutputError(`path ${JSON.stringify(path)}: at most 31 printable bytes`);
  }
  return path;
}

export { OutputError, cut, describe, pathOf };

export class Server {
  constructor(kernel, declaration, channel, loadError = null, log = process.stderr) {
    Object.assign(this, { kernel, declaration, channel, loadError, log });
    this.sessions = new Map();
    this.nextSession = 1n;
    this.failures = 0;
  }

  say(text) { this.log.write(`attest-kernel: ${text}\n`); }

  /** The process's exit code: 0 after BYE or end of input, 2 after an ERROR, 1 when attest is gone.
   * Kernels may be async (ONNX Runtime's sessions are): each call is awaited before the next read. */
  async run() {
    const handlers = { [TYPES.HELLO]: this.hello, [TYPES.FORWARD]: this.forward, [TYPES.DECODE_OPEN]: this.decodeOpen,
      [TYPES.DECODE_STEP]: this.decodeStep, [TYPES.DECODE_CLOSE]: this.decodeClose, [TYPES.BACKWARD]: this.backward,
      [TYPES.MERGE]: this.merge, [TYPES.DECODE_RETAINED]: this.decodeRetained, [TYPES.PAGE_BYTES]: this.pageBytes,
      [TYPES.DECODE_PAGED]: this.decodePaged, [TYPES.FORWARD_PACKED]: this.forwardPacked };
    try {
      for (;;) {
        const frame = this.channel.readFrame();
        if (frame === null) return 0;
        if (this.loadError !== null) {
          this.say(this.loadError);
          this.channel.writeFrame(TYPES.ERROR, messages.encodeString(cut(this.loadError)));
          return 2;
        }
        if (frame.type === TYPES.BYE) return 0;
        const handler = handlers[frame.type];
        if (!handler) throw new ProtocolError(`unexpected message type ${frame.type} (${TYPE_NAMES[frame.type] ?? "?"})`);
        if ((await handler.call(this, new Reader(frame.payload))) === false) return 2;
      }
    } catch (e) {
      if (e.code === "EPIPE") return 1;
      const message = e instanceof ProtocolError ? e.message : `attest-kernel internal error: ${describe(e)}`;
      this.say(e instanceof ProtocolError ? `protocol error: ${message}` : `${message}\n${e.stack}`);
      try { this.channel.writeFrame(TYPES.ERROR, messages.encodeString(cut(message))); } catch { /* attest is gone */ }
      return 2;
    }
  }

  hello(r) {
    const version = r.u32();
    if (version !== VERSION) {
      const message = `protocol version ${version} not supported (this kernel speaks ${VERSION})`;
      this.say(message);
      this.channel.writeFrame(TYPES.ERROR, messages.encodeString(message));
      return false;
    }
    this.channel.writeFrame(TYPES.DESCRIPTOR, messages.encodeDescriptor(this.declaration, TABLE_VERSION.abi_major));
  }

  /** {status, error, result} of fn() (awaited); a thrown error or rejection becomes a status. */
  async call(fn, who) {
    try {
      return { status: STATUS.ok, error: "", result: await fn() };
    } catch (e) {
      if (e instanceof Unsupported || e instanceof InvalidArgument) return { status: e.status, error: cut(e.message || e.name), result: null };
      if (++this.failures <= 3) this.say(`${who} threw:\n${e?.stack ?? e}`);
      return { status: STATUS.internal_error, error: cut(describe(e)), result: null };
    }
  }

  /** An output of the kernel checked and converted (see output()); OutputError when it is wrong. */
  output(value, format, length, what, layout) { return output(value, format, length, what, layout); }

  /** Converts a kernel's {o, lse, path} or reports what is wrong with it as a status. */
  outputs(call, wantLse, oLength, lseLength, layout, who) {
    if (call.status !== STATUS.ok) return call;
    try {
      const result = call.result;
      if (result == null || typeof result !== "object" || !("o" in result)) {
        throw new OutputError(`${who} returned ${result === null ? "null" : typeof result}; expected {o, lse, path}`);
      }
      if (wantLse && result.lse == null) throw new OutputError(`${who} returned no lse, and the declaration has the feature "lse"`);
      return { status: STATUS.ok, error: "", path: pathOf(result.path),
        o: output(result.o, this.declaration.precision.o, oLength, "o", layout),
        lse: wantLse ? output(result.lse, "f32", lseLength, "lse", layout.replace(/\[D.\]$/, "")) : null };
    } catch (e) {
      return { status: STATUS.internal_error, error: cut(e instanceof OutputError ? e.message : describe(e)) };
    }
  }

  async forward(r) {
    const problem = new Problem(messages.decodeProblem(r, this.declaration.precision), this.declaration);
    r.expectEnd();
    if (this.declaration.contract.decode_only) throw new ProtocolError("FORWARD sent to a decode-only kernel");
    const call = await this.call(() => this.kernel(problem), "the kernel");
    const reply = this.outputs(call, this.declaration.has("lse"), problem.oLength, problem.lseLength, "[B][H][Tq][Dv]", "the kernel");
    this.channel.writeFrame(TYPES.FORWARD_RESULT, messages.encodeForwardResult(reply));
  }

  /** FORWARD_PACKED (ABI 2.8): the declaration's packed(problem) on a PackedProblem. */
  async forwardPacked(r) {
    if (!this.declaration.packed) throw new ProtocolError("FORWARD_PACKED sent to a kernel declared without packed");
    const problem = new PackedProblem(messages.decodePackedProblem(r));
    if (this.declaration.packed_int64) problem.widenOffsets();
    const call = await this.call(() => this.declaration.packed(problem), "the packed kernel");
    let reply = { status: call.status, error: call.error };
    if (call.status === STATUS.ok) {
      try {
        const result = call.result ?? {};
        reply = { status: STATUS.ok, path: pathOf(result.path),
          o: output(result.o, "f32", problem.oLength, "o", "[total_q][H][Dv]"),
          lse: problem.want_lse ? output(result.lse, "f32", problem.lseLength, "lse", "[H][total_q]") : null };
      } catch (e) {
        reply = { status: STATUS.internal_error, error: cut(e instanceof OutputError ? e.message : describe(e)) };
      }
    }
    this.channel.writeFrame(TYPES.FORWARD_PACKED_RESULT, messages.encodePackedResult(reply));
  }

  async decodeOpen(r) {
    const config = new DecodeConfig(messages.decodeDecodeOpen(r), this.declaration);
    if (!this.declaration.decode) {
      const message = `${this.declaration.name} does not decode (no decode: function)`;
      this.channel.writeFrame(TYPES.DECODE_OPENED, messages.encodeDecodeOpened(STATUS.unsupported, message, 0));
      return;
    }
    let { status, error, result: session } = await this.call(() => this.declaration.decode(config), "the decode function");
    if (status === STATUS.ok && typeof session?.step !== "function") {
      [status, error] = [STATUS.internal_error, "the decode function returned no session with step()"];
    }
    let number = 0n;
    if (status === STATUS.ok) {
      number = this.nextSession++;
      this.sessions.set(number, { session, config, length: 0, last: 0 }); // tokens held, tokens of the last step
    }
    this.channel.writeFrame(TYPES.DECODE_OPENED, messages.encodeDecodeOpened(status, error, number));
  }

  async decodeStep(r) {
    const number = r.u64();
    const n = r.i32();
    const wantLse = r.i32() !== 0;
    const raw = [r.array(Uint8Array), r.array(Uint8Array), r.array(Uint8Array)];
    r.expectEnd();
    const entry = this.sessions.get(number);
    if (!entry) throw new ProtocolError("decode step for an unknown session");
    if (n < 1) throw new ProtocolError(`decode step of ${n} tokens`);
    const c = entry.config;
    const shapes = [[c.batch, c.heads, n, c.head_dim], [c.batch, c.kv_heads, n, c.head_dim], [c.batch, c.kv_heads, n, c.value_dim]];
    // Typed arrays in their storage formats; quantized K/V as QuantizedRows (q8_head: codes alone,
    // the scales [B][Hkv] came with DECODE_OPEN).
    const arrays = ["q", "k", "v"].map((name, i) => {
      const format = this.declaration.precision[name];
      const scales = format === "q8_head" ? c[`${name}_scales`] : null;
      if (format === "q8_head" && scales === null) throw new ProtocolError("a q8_head session opened without its static scales");
      try {
        return messages.storageArray(raw[i], format, shapes[i], `step ${name}`, scales);
      } catch (e) {
        throw new ProtocolError(`decode step arrays do not match n and the session's configuration (${e.message})`);
      }
    });
    [entry.length, entry.last] = [entry.length + n, n];
    const call = await this.call(() => entry.session.step(...arrays, wantLse, n), "the decode session's step");
    const reply = this.outputs(call, wantLse, c.batch * c.heads * n * c.value_dim, c.batch * c.heads * n, "[B][H][n][Dv]", "the decode session's step");
    this.channel.writeFrame(TYPES.DECODE_RESULT, messages.encodeDecodeResult(reply));
  }

  async decodeClose(r) {
    const number = r.u64();
    r.expectEnd();
    const entry = this.sessions.get(number);
    this.sessions.delete(number);
    if (typeof entry?.session.close === "function") await this.call(() => entry.session.close(), "the decode session's close");
    this.channel.writeFrame(TYPES.CLOSED);
  }

  async backward(r) {
    if (!this.declaration.backward) throw new ProtocolError("BACKWARD sent to a kernel declared without backward");
    const problem = new Problem(messages.decodeProblem(r, this.declaration.precision), this.declaration);
    const floats = (bytes) => { // o and d_o travel as u8[] in O's storage format: f32 for a backward
      if (bytes.length % 4) throw new ProtocolError("backward o or d_o is not float32");
      return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
    };
    const grad = { threads: r.i32(), o: floats(r.array(Uint8Array)), lse: r.array(Float32Array), d_o: floats(r.array(Uint8Array)) };
    r.expectEnd();
    if (grad.o.length !== problem.oLength || grad.d_o.length !== problem.oLength || grad.lse.length !== problem.lseLength) {
      throw new ProtocolError("backward o, lse or d_o does not match the problem");
    }
    const call = await this.call(() => this.declaration.backward(problem, grad), "the backward");
    let reply = { status: call.status, error: call.error };
    if (call.status === STATUS.ok) {
      try {
        const g = call.result ?? {};
        const { batch: B, heads: H, kv_heads: Hkv, q_len: Tq, k_len: Tk, head_dim: Dk, value_dim: Dv } = problem;
        reply = { status: STATUS.ok, path: pathOf(g.path),
          dq: output(g.dq, "f32", B * H * Tq * Dk, "dq", "[B][H][Tq][Dk]"),
          dk: output(g.dk, "f32", B * Hkv * Tk * Dk, "dk", "[B][Hkv][Tk][Dk]"),
          dv: output(g.dv, "f32", B * Hkv * Tk * Dv, "dv", "[B][Hkv][Tk][Dv]"),
          dsinks: problem.sinks ? output(g.dsinks, "f32", H, "dsinks", "[H]") : null };
      } catch (e) {
        reply = { status: STATUS.internal_error, error: cut(e instanceof OutputError ? e.message : describe(e)) };
      }
    }
    this.channel.writeFrame(TYPES.BACKWARD_RESULT, messages.encodeBackwardResult(reply));
  }

  /** MERGE (ABI 2.6): partial states { parts, rows, value_dim, o [parts][rows][Dv], lse [parts][rows] }
   * (o as float32 whatever its storage) merged by the declaration's merge into { o, lse }. */
  async merge(r) {
    if (!this.declaration.merge) throw new ProtocolError("MERGE sent to a kernel declared without merge");
    const [parts, rows, valueDim, storage] = [r.i32(), r.i32(), r.i32(), r.i32()];
    const bytes = r.array(Uint8Array), lse = r.array(Float32Array);
    r.expectEnd();
    const format = Object.keys(FORMAT_CODES).find((name) => FORMAT_CODES[name] === storage);
    if (!["f32", "bf16"].includes(format) || Math.min(parts, rows, valueDim) < 1) {
      throw new ProtocolError(`merge: storage ${storage}, parts ${parts}, rows ${rows}, value_dim ${valueDim}`);
    }
    const width = format === "f32" ? 4 : 2;
    if (bytes.length !== parts * rows * valueDim * width || lse.length !== parts * rows) {
      throw new ProtocolError("merge arrays o and lse do not match the shape");
    }
    const copy = new Uint8Array(bytes); // aligned for the typed view
    const stored = format === "f32" ? new Float32Array(copy.buffer) : new Uint16Array(copy.buffer);
    const states = { parts, rows, value_dim: valueDim, o: toFloat32(stored, format), lse };
    const call = await this.call(() => this.declaration.merge(states), "the merge");
    let reply = { status: call.status, error: call.error };
    if (call.status === STATUS.ok) {
      try {
        const m = call.result ?? {};
        reply = { status: STATUS.ok, path: pathOf(m.path), o: output(m.o, "f32", rows * valueDim, "o", "[rows][Dv]"),
          lse: output(m.lse, "f32", rows, "lse", "[rows]") };
      } catch (e) {
        reply = { status: STATUS.internal_error, error: cut(e instanceof OutputError ? e.message : describe(e)) };
      }
    }
    this.channel.writeFrame(TYPES.MERGE_RESULT, messages.encodeMergeResult(reply));
  }
}

Object.assign(Server.prototype, cacheHandlers); // ABI 2.4: DECODE_RETAINED, PAGE_BYTES, DECODE_PAGED
