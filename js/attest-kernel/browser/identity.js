// The certificate's identity of a kernel run in the browser: its declared name and the adapter
// it ran on, since a certificate made on SwiftShader says nothing yet about a given real GPU.
const MAX_NAME = 63;

/** "NAME @ vendor architecture (fallback, sg4, no-f16)": the adapter a certificate was made on. */
export function identity(name, opened) {
  const a = opened.adapter;
  const subgroups = a.subgroupMinSize === a.subgroupMaxSize ? `${a.subgroupMinSize}` : `${a.subgroupMinSize}-${a.subgroupMaxSize}`;
  const traits = [a.fallback ? "fallback" : null, a.subgroupMinSize ? `sg${subgroups}` : null,
    opened.features.includes("shader-f16") ? "f16" : "no-f16"].filter(Boolean);
  const full = `${name} @ ${[a.vendor, a.architecture].filter(Boolean).join(" ") || "unknown adapter"} (${traits.join(", ")})`;
  if (Buffer.byteLength(full) > MAX_NAME) throw new Error(`the name with the adapter, ${JSON.stringify(full)}, exceeds ${MAX_NAME} bytes: shorten the declared name`);
  return full;
}
