// A problem and a result crossing page.evaluate: typed arrays as {type, base64} (65536 floats: 40 ms
// a round trip, 1.7 s as a plain array), every other field as it is. The page decodes in page.mjs.

/** The problem's fields as one JSON-able object for the page. */
export function encodeProblem(problem) {
  const encoded = {};
  for (const [name, value] of Object.entries(problem)) {
    if (name === "declaration" || name === "storage" || typeof value === "function") continue;
    encoded[name] = ArrayBuffer.isView(value)
      ? { type: value.constructor.name, base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") }
      : value;
  }
  return encoded;
}

/** A base64 string of float32 values as a Float32Array. */
export function decodeFloats(base64) {
  const bytes = Buffer.from(base64, "base64");
  const aligned = new Uint8Array(bytes.length);
  aligned.set(bytes);
  return new Float32Array(aligned.buffer);
}
