// attest's reading of a DESCRIPTOR payload, driven by the interface table's DESCRIPTOR and LAYOUTS
// rows (not by the encoder in messages.js): what `describe` prints. A section (the fields one ABI
// minor added) is read only when the payload goes on, as attest reads a shorter descriptor.
import { ALIBI_SLOPES, CACHE_POLICIES, CAPABILITIES, DESCRIPTOR, EMPTY_ROWS, FORMATS, INPUT_DOMAINS, LAYOUTS } from "./interface.js";
import { ProtocolError, Reader } from "./wire.js";

const nameOf = (table, code) => Object.keys(table).find((name) => table[name][0] === code) ?? `? (${code})`;
const bitsOf = (bits) => Object.keys(CAPABILITIES).filter((name) => bits & (1 << CAPABILITIES[name][0]));
const ENUMS = { empty_rows: EMPTY_ROWS, "contract.alibi_slopes": ALIBI_SLOPES, "contract.inputs": INPUT_DOMAINS,
  cache_policy: CACHE_POLICIES };

/** A field's value, enumerations by name: formats, capability bits, policies. */
function named(field, value) {
  if (field === "capabilities" || field === "required" || field === "excluded") return bitsOf(value);
  if (field in ENUMS) return nameOf(ENUMS[field], value);
  const last = field.split(".").pop();
  if (last === "weight_sum") return value === 0 ? null : nameOf(FORMATS, value - 1);
  if (LAYOUTS.precision.some(([type, name]) => type === "i32" && name === last && name !== "pv_unnormalised")) {
    return nameOf(FORMATS, value);
  }
  return value;
}

function read(r, type) {
  switch (type) {
    case "u32": return r.u32();
    case "i32": return r.i32();
    case "i64": return r.i64();
    case "f64": return r.f64();
    case "str": return r.str();
    case "i32_array": return Array.from(r.array(Int32Array));
    case "range": return [r.i64(), r.i64()];
    case "precision": case "path_precision": case "path_declaration": return readLayout(r, LAYOUTS[type]);
    default: {
      const list = /^list_(.*)$/.exec(type);
      if (!list) throw new ProtocolError(`the table's descriptor has a field of type ${type} this reader does not know`);
      const count = r.u32();
      if (count > 4096) throw new ProtocolError(`a list of ${count} ${list[1]}`);
      return Array.from({ length: count }, () => read(r, list[1]));
    }
  }
}

function readLayout(r, layout) {
  const out = {};
  for (const [type, name] of layout) out[name] = named(name, read(r, type));
  return out;
}

/** {field: value} in the table's order; stops where a section would start and the payload ends. */
export function decodeDescriptor(payload) {
  const r = new Reader(payload);
  const d = {};
  let section = null;
  for (const [type, field, version] of DESCRIPTOR) {
    if (String(version) !== section && section !== null && r.atEnd()) break;
    section = String(version);
    d[field] = named(field, read(r, type));
  }
  r.expectEnd();
  return d;
}
