// ONNX Runtime Web's WebGPU kernels run in one headless Chromium, for a kernel served by
// js/attest-kernel/serve.js: the browser kernel host's pieces (chromium.js, page-server.js, its page
// for the adapter) start the browser, and a runtime as ci/examples/onnxruntime/sessions.mjs makes
// (sessionFor(spec), tensor()) runs each one-node model in the page (ort_page.mjs). The browser dies
// with this process; a crashed page or a closed browser ends it with exit 1 (a crash for attest).
import path from "node:path";
import { fileURLToPath } from "node:url";
import { killBrowser, launchChromium, loadPlaywright, tieBrowserToProcess, CHROMIUM } from "../../../js/attest-kernel/browser/chromium.js";
import { servePage } from "../../../js/attest-kernel/browser/page-server.js";
import { identity } from "../../../js/attest-kernel/browser/identity.js";
import { singleNodeModel } from "../onnxruntime/onnx_writer.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const HOST_PAGE = path.join(HERE, "../../../js/attest-kernel/browser");
const ORT_DIST = "onnxruntime/node_modules/onnxruntime-web/dist"; // under ci/examples, the page's /kernel/
const LIMIT = 64; // sessions kept in the page; the oldest is released first
const ARRAYS = { float32: Float32Array, int32: Int32Array, bool: Uint8Array, float16: Uint16Array };

function die(message) {
  process.stderr.write(`ort-webgpu: ${message}\n`);
  killBrowser();
  process.exit(1);
}

const base64 = (view) => Buffer.from(view.buffer, view.byteOffset, view.byteLength).toString("base64");

function decode({ type, dims, base64: text }) {
  const bytes = Buffer.from(text, "base64");
  const aligned = new Uint8Array(bytes.length);
  aligned.set(bytes);
  return { type, dims, data: new ARRAYS[type](aligned.buffer) };
}

/** Starts chromium with `bundle` (a file of onnxruntime-web's dist/) on `provider`; resolves to
 * { runtime(name), identity(declaredName) }. Throws when chromium or its WebGPU adapter is missing. */
export async function openOrtPage(bundle, provider, hideSubgroups = false) {
  const playwright = await loadPlaywright([path.join(HERE, "package.json")]);
  if (!playwright) throw new Error("playwright-core is not installed (ci/install-npm-deps.sh installs it)");
  tieBrowserToProcess();
  let browser;
  try {
    browser = await launchChromium(playwright);
  } catch (e) {
    throw new Error(`cannot start ${CHROMIUM}: ${e.message.split("\n")[0]}`);
  }
  browser.on("disconnected", () => die("the browser closed or crashed"));
  const site = await servePage(HOST_PAGE, path.join(HERE, ".."));
  const page = await browser.newPage();
  page.on("crash", () => die("the page crashed"));
  await page.goto(`${site.origin}/`);
  await page.waitForFunction(() => window.attestHost !== undefined);
  const opened = await page.evaluate(() => window.attestHost.open(null, null));
  if (opened.noAdapter) throw new Error(`no WebGPU adapter: ${opened.noAdapter}`);
  await page.evaluate(async ([pageModule, url, ep, hide]) => {
    window.ortPage = await import(pageModule);
    await window.ortPage.load(url, ep, hide);
  }, [`${site.origin}/kernel/webgpu/ort_page.mjs`, `${site.origin}/kernel/${ORT_DIST}/${bundle}`, provider, hideSubgroups]);
  page.on("framenavigated", (frame) => { if (frame === page.mainFrame()) die("the page navigated away"); });

  /** A call into ort_page.mjs; an exception there (ONNX Runtime's) is thrown here as an Error. */
  const call = (method, args) => page.evaluate(([m, a]) => window.ortPage[m](...a), [method, args]);

  const runtime = (name) => {
    const cache = new Map(); // key -> Promise of the page's session id
    return {
      name,
      async sessionFor(spec) {
        const key = JSON.stringify(spec);
        if (!cache.has(key)) {
          cache.set(key, call("create", [singleNodeModel(spec).toString("base64")]));
          if (cache.size > LIMIT) {
            const [oldest, id] = cache.entries().next().value;
            cache.delete(oldest);
            id.then((n) => call("release", [n]), () => {});
          }
        }
        let id;
        try {
          id = await cache.get(key);
        } catch (e) {
          cache.delete(key);
          throw e;
        }
        return {
          async run(feeds) {
            const encoded = Object.fromEntries(Object.entries(feeds).map(([n, t]) => [n, { type: t.type, dims: t.dims, base64: base64(t.data) }]));
            const outputs = await call("run", [id, encoded]);
            return Object.fromEntries(Object.entries(outputs).map(([n, t]) => [n, decode(t)]));
          },
        };
      },
      tensor: (type, data, dims) => ({ type, data: ArrayBuffer.isView(data) ? data : ARRAYS[type].from(data), dims }),
    };
  };
  return { runtime, identity: (declaredName) => identity(declaredName, opened), adapter: opened, page };
}
