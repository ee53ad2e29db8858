// The bytes of attest's process protocol, version 3 (impl/PROTOCOL.md): frames, little-endian
// payload readers and writers. Frame type numbers and the protocol version come from the table.
import { MESSAGES, VERSION as TABLE_VERSION } from "./interface.js";

export const MAGIC = 0x54535441; // bytes "ATST"
export const VERSION = TABLE_VERSION.protocol;
export const MAX_PAYLOAD = 2 ** 34;
export const TYPES = Object.fromEntries(Object.entries(MESSAGES).map(([name, row]) => [name, row[0]]));
export const TYPE_NAMES = Object.fromEntries(Object.entries(TYPES).map(([name, id]) => [id, name]));
const LAST_TYPE = Math.max(...Object.values(TYPES));

export class ProtocolError extends Error {}

export function frameHeader(type, size) {
  const header = Buffer.alloc(16);
  header.writeUInt32LE(MAGIC, 0);
  header.writeUInt32LE(type, 4);
  header.writeBigUInt64LE(BigInt(size), 8);
  return header;
}

/** {type, size} of a 16-byte header; ProtocolError on a bad magic, type or size. */
export function parseHeader(header) {
  const magic = header.readUInt32LE(0);
  if (magic !== MAGIC) throw new ProtocolError(`bad frame magic 0x${magic.toString(16)} (not the attest protocol?)`);
  const type = header.readUInt32LE(4);
  if (type < 1 || type > LAST_TYPE) throw new ProtocolError(`unknown message type ${type}`);
  const size = Number(header.readBigUInt64LE(8));
  if (size > MAX_PAYLOAD) throw new ProtocolError(`message of ${size} bytes is too large`);
  return { type, size };
}

export function encodeFrame(type, payload = Buffer.alloc(0)) {
  return Buffer.concat([frameHeader(type, payload.length), payload]);
}

/** Every complete frame of a buffer: [{type, payload}] (for tests and tools). */
export function splitFrames(data) {
  const frames = [];
  let at = 0;
  while (at + 16 <= data.length) {
    const { type, size } = parseHeader(data.subarray(at, at + 16));
    if (at + 16 + size > data.length) throw new ProtocolError("input ended inside a message");
    frames.push({ type, payload: data.subarray(at + 16, at + 16 + size) });
    at += 16 + size;
  }
  if (at !== data.length) throw new ProtocolError(`${data.length - at} trailing bytes are not a frame`);
  return frames;
}

/** Builds a payload: scalars, str = u32 length + UTF-8, T[] = u64 count + elements. */
export class Writer {
  constructor() { this.parts = []; }
  #scalar(bytes, write) { const b = Buffer.alloc(bytes); write(b); this.parts.push(b); return this; }
  u32(x) { return this.#scalar(4, (b) => b.writeUInt32LE(x >>> 0)); }
  i32(x) { return this.#scalar(4, (b) => b.writeInt32LE(x | 0)); }
  u64(x) { return this.#scalar(8, (b) => b.writeBigUInt64LE(BigInt(x))); }
  i64(x) { return this.#scalar(8, (b) => b.writeBigInt64LE(BigInt(x))); }
  f64(x) { return this.#scalar(8, (b) => b.writeDoubleLE(x)); }
  str(s) { const data = Buffer.from(String(s), "utf8"); this.u32(data.length); this.parts.push(data); return this; }
  /** A T[] from a typed array (its elements' bytes; the count in elements) or null (empty). */
  array(values, Type) {
    const typed = values == null ? new Type(0) : values instanceof Type ? values : Type.from(values);
    this.u64(typed.length);
    this.parts.push(Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength));
    return this;
  }
  /** A u8[] of raw bytes: a buffer in its storage format (any typed array). */
  bytes(data) {
    const view = data == null ? Buffer.alloc(0) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    this.u64(view.length);
    this.parts.push(view);
    return this;
  }
  finish() { return Buffer.concat(this.parts); }
}

/** Reads a payload; ProtocolError when it ends early. Arrays come back as copies, aligned. */
export class Reader {
  constructor(payload) { this.buffer = payload; this.at = 0; }
  #need(n) { if (this.buffer.length - this.at < n) throw new ProtocolError("message ends early"); }
  #scalar(n, read) { this.#need(n); const value = read(this.buffer, this.at); this.at += n; return value; }
  u32() { return this.#scalar(4, (b, at) => b.readUInt32LE(at)); }
  i32() { return this.#scalar(4, (b, at) => b.readInt32LE(at)); }
  u64() { return this.#scalar(8, (b, at) => b.readBigUInt64LE(at)); }
  i64() { return this.#scalar(8, (b, at) => Number(b.readBigInt64LE(at))); }
  f64() { return this.#scalar(8, (b, at) => b.readDoubleLE(at)); }
  str() {
    const n = this.u32();
    this.#need(n);
    const text = this.buffer.toString("utf8", this.at, this.at + n);
    this.at += n;
    return text;
  }
  /** A T[] as a new typed array of Type (Float32Array, Int32Array, Uint8Array, Uint16Array, BigInt64Array). */
  array(Type) {
    const count = this.u64();
    if (count > BigInt(Math.floor((this.buffer.length - this.at) / Type.BYTES_PER_ELEMENT))) {
      throw new ProtocolError("array longer than its message");
    }
    const bytes = Number(count) * Type.BYTES_PER_ELEMENT;
    const copy = new Uint8Array(bytes);
    copy.set(this.buffer.subarray(this.at, this.at + bytes));
    this.at += bytes;
    return new Type(copy.buffer, 0, Number(count));
  }
  atEnd() { return this.at === this.buffer.length; }
  expectEnd() { if (!this.atEnd()) throw new ProtocolError("message has trailing bytes"); }
}
