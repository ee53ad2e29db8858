// MODULE.mjs:EXPORT to the declared kernel it names (serve.js and describe.js).
import path from "node:path";
import { pathToFileURL } from "node:url";

export async function loadKernel(spec) {
  const at = spec.lastIndexOf(":");
  if (at <= 0 || at === spec.length - 1) throw new Error(`${JSON.stringify(spec)} is not MODULE.mjs:EXPORT`);
  const [file, name] = [spec.slice(0, at), spec.slice(at + 1)];
  const module = await import(pathToFileURL(path.resolve(file)).href);
  const kernel = module[name];
  if (typeof kernel !== "function") throw new Error(`${file} exports no function ${JSON.stringify(name)}`);
  if (!kernel.declaration) throw new Error(`${file}:${name} has no declaration: wrap it in declare({...}, fn)`);
  return kernel;
}
