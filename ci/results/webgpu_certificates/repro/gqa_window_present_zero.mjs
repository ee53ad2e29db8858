// com.microsoft GroupQueryAttention on ONNX Runtime Web's native WebGPU EP, prompt of 3 tokens, head
// size 8, K = V = 0, 1, ..., 23: present_key and present_value, the KV cache the next decode step
// takes as its past, are K and V. With local_window_size = 2 they come back all 0, so every decode
// step on top of them attends to zero keys and values. The CPU EP returns K and V either way.
import { openPage, gqaPrompt } from "./common.mjs";

const T = 3;
const D = 8;
const kv = Float32Array.from({ length: T * D }, (_, i) => i);
const page = await openPage();
for (const window of [0, 2]) {
  const attributes = window ? { local_window_size: window } : {};
  const out = await gqaPrompt(page, { T, D, q: new Float32Array(T * D), k: kv, v: kv, attributes });
  console.log(`local_window_size ${window}: present_key ${out.present_key.slice(0, 10).join(" ")} ...; present_value ${out.present_value.slice(0, 10).join(" ")} ...`);
}
await page.close();
