// attest-kernel: serve a JavaScript attention kernel to attest (impl/PROTOCOL.md, version 3).
export { declare, declaration, DeclarationError, FEATURES, PRECISIONS, Path } from "./declaration.js";
export { Problem, DecodeConfig } from "./problem.js";
export { Server, Channel, openChannel, STATUS, Unsupported, InvalidArgument } from "./server.js";
export { toFloat32, fromNumbers, f16ToF32, f32ToF16, bf16ToF32, f32ToBf16 } from "./storage.js";
export * as wire from "./wire.js";
export * as messages from "./messages.js";
export * as table from "./interface.js";
export * as quantized from "./quantized.js";
export { QuantizedRows } from "./quantized.js";
