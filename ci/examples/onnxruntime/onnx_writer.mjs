// A small writer of ONNX models (protobuf wire format, onnx.proto3's field numbers): just what
// one operator node with typed inputs and outputs needs. No dependency beyond Node.

// TensorProto.DataType
export const FLOAT = 1;
export const INT32 = 6;
export const INT64 = 7;
export const BOOL = 9;
export const FLOAT16 = 10;

const AttributeType = { FLOAT: 1, INT: 2, STRING: 3 };

function varint(value) {
  let v = BigInt.asUintN(64, BigInt(value));
  const bytes = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v) byte |= 0x80;
    bytes.push(byte);
  } while (v);
  return Buffer.from(bytes);
}

const key = (field, wire) => varint((field << 3) | wire);
const intField = (field, value) => Buffer.concat([key(field, 0), varint(value)]);
const bytesField = (field, data) => {
  const body = typeof data === "string" ? Buffer.from(data, "utf8") : data;
  return Buffer.concat([key(field, 2), varint(body.length), body]);
};
const floatField = (field, value) => {
  const body = Buffer.alloc(4);
  body.writeFloatLE(value);
  return Buffer.concat([key(field, 5), body]);
};

/** ValueInfoProto: a named tensor of `elemType` and `shape` (numbers, or strings for symbolic dims). */
function valueInfo(name, elemType, shape) {
  const dims = shape.map((d) => bytesField(1, typeof d === "string" ? bytesField(2, d) : intField(1, d)));
  const tensorType = Buffer.concat([intField(1, elemType), bytesField(2, Buffer.concat(dims))]);
  return Buffer.concat([bytesField(1, name), bytesField(2, bytesField(1, tensorType))]);
}

/** AttributeProto from a JS value: integers as INT, other numbers as FLOAT, strings as STRING. */
function attribute(name, value) {
  if (typeof value === "string") return Buffer.concat([bytesField(1, name), intField(20, AttributeType.STRING), bytesField(4, value)]);
  if (Number.isInteger(value)) {
    return Buffer.concat([bytesField(1, name), intField(20, AttributeType.INT), intField(3, value)]);
  }
  throw new Error(`attribute ${name}: give floats with attr.float(${value})`);
}

/** A FLOAT attribute (a number that happens to be an integer stays a float). */
export const float = (value) => ({ float: value });

function anyAttribute(name, value) {
  if (value && typeof value === "object" && "float" in value) {
    return Buffer.concat([bytesField(1, name), intField(20, AttributeType.FLOAT), floatField(2, value.float)]);
  }
  return attribute(name, value);
}

/**
 * The bytes of a ModelProto holding one node.
 * node: {opType, domain, inputs: [name or ""], outputs: [name], attributes: {name: value}}
 * inputs/outputs: [{name, type, shape}] graph inputs and outputs.
 * opsets: {domain: version} ("" is the ONNX domain).
 */
export function singleNodeModel({ node, inputs, outputs, opsets, irVersion = 11 }) {
  const nodeProto = Buffer.concat([
    ...node.inputs.map((name) => bytesField(1, name)),
    ...node.outputs.map((name) => bytesField(2, name)),
    bytesField(3, node.opType),
    bytesField(4, node.opType),
    ...Object.entries(node.attributes ?? {}).map(([name, value]) => bytesField(5, anyAttribute(name, value))),
    bytesField(7, node.domain ?? ""),
  ]);
  const graph = Buffer.concat([
    bytesField(1, nodeProto),
    bytesField(2, "attest"),
    ...inputs.map((t) => bytesField(11, valueInfo(t.name, t.type, t.shape))),
    ...outputs.map((t) => bytesField(12, valueInfo(t.name, t.type, t.shape))),
  ]);
  const opsetImports = Object.entries(opsets).map(([domain, version]) => bytesField(8, Buffer.concat([bytesField(1, domain), intField(2, version)])));
  return Buffer.concat([intField(1, irVersion), bytesField(2, "attest"), bytesField(7, graph), ...opsetImports]);
}
