#!/usr/bin/env node
// Serves a WebGPU kernel to attest from inside one headless Chromium:
//   node js/attest-kernel/browser.js MODULE.mjs:EXPORT     (the protocol, as serve.js)
//   node js/attest-kernel/browser.js --probe               (prints the adapter; exit 2 without one)
// EXPORT is {declaration: {...declare()'s fields}, forward(problem, device)}; forward runs in the page
// with the page's GPUDevice and returns {o, lse, path}. The adapter joins the declared name (the
// certificate's identity). A crashed page, a lost GPU device or a closed browser ends this process
// with exit 1 (attest: a crash); a hung page is attest's hang, and the browser dies with this process.
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { declaration as checkDeclaration } from "./declaration.js";
import { Server, InvalidArgument, Unsupported, openChannel } from "./server.js";
import { killBrowser, launchChromium, loadPlaywright, tieBrowserToProcess, CHROMIUM } from "./browser/chromium.js";
import { servePage } from "./browser/page-server.js";
import { decodeFloats, encodeProblem } from "./browser/transfer.js";
import { identity } from "./browser/identity.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));

function die(message, code) {
  process.stderr.write(`attest-kernel browser: ${message}\n`);
  killBrowser();
  process.exit(code);
}

function parseArguments(args) {
  if (args.length === 1 && args[0] === "--probe") return { probe: true };
  const spec = args.length === 1 ? args[0] : "";
  const at = spec.lastIndexOf(":");
  if (spec.startsWith("-") || at <= 0 || at === spec.length - 1) {
    die("usage: node browser.js MODULE.mjs:EXPORT | --probe  (EXPORT: {declaration, forward(problem, device)})", 2);
  }
  return { file: path.resolve(spec.slice(0, at)), name: spec.slice(at + 1) };
}

/** The kernel as the Server calls it: one page.evaluate per FORWARD. */
function pageKernel(page) {
  return async (problem) => {
    let reply;
    try {
      reply = await page.evaluate((encoded) => window.attestHost.forward(encoded), encodeProblem(problem));
    } catch (e) {
      die(`the page failed during a call (a crash for attest): ${e.message.split("\n")[0]}`, 1);
    }
    if (reply.lost) die(reply.lost, 1);
    if (reply.thrown) {
      const Type = { Unsupported, InvalidArgument }[reply.thrown.name] ?? Error;
      const error = new Type(reply.thrown.message);
      if (Type === Error) error.name = reply.thrown.name;
      error.stack = `${reply.thrown.name}: ${reply.thrown.message}\n${reply.thrown.stack}`;
      throw error;
    }
    return { o: decodeFloats(reply.o), lse: reply.lse === null ? null : decodeFloats(reply.lse), path: reply.path };
  };
}

const options = parseArguments(process.argv.slice(2));
let channel = null;
if (!options.probe) {
  try {
    channel = openChannel();
  } catch (e) {
    die(e.message, 2);
  }
}
const playwright = await loadPlaywright([options.file ?? path.join(HERE, "browser.js"), path.join(HERE, "../../ci/examples/webgpu/package.json")]);
if (!playwright) die("playwright-core is not installed (ci/install-npm-deps.sh installs it)", 2);
tieBrowserToProcess();
let browser;
try {
  browser = await launchChromium(playwright);
} catch (e) {
  die(`cannot start ${CHROMIUM}: ${e.message.split("\n")[0]}`, 2);
}
browser.on("disconnected", () => die("the browser closed or crashed", 1));
const site = await servePage(path.join(HERE, "browser"), options.probe ? path.join(HERE, "browser") : path.dirname(options.file));
const page = await browser.newPage();
page.on("crash", () => die("the page crashed", 1));
await page.goto(`${site.origin}/`);
await page.waitForFunction(() => window.attestHost !== undefined);
page.on("framenavigated", (frame) => { if (frame === page.mainFrame()) die("the kernel navigated the page away", 1); });

const moduleUrl = options.probe ? null : `${site.origin}/kernel/${path.basename(options.file)}`;
let opened;
try {
  opened = options.probe
    ? await page.evaluate(() => window.attestHost.open(null, null))
    : await page.evaluate(([url, name]) => window.attestHost.open(url, name), [moduleUrl, options.name]);
} catch (e) {
  opened = { noAdapter: `the page failed opening a WebGPU device or loading ${options.file}:${options.name} in the page: ${e.message.split("\n")[0]}` };
}
if (opened.noAdapter) die(`no WebGPU adapter: ${opened.noAdapter}`, 2);
if (options.probe) {
  process.stdout.write(`${JSON.stringify(opened)}\n`);
  killBrowser();
  process.exit(0);
}

let kernel = null;
let declared = null;
let loadError = opened.error ?? null;
if (loadError === null) {
  try {
    const exported = (await import(pathToFileURL(options.file).href))[options.name];
    declared = checkDeclaration({ ...exported.declaration, name: identity(exported.declaration.name, opened) });
    kernel = pageKernel(page);
    process.stderr.write(`attest-kernel browser: ${declared.name}; adapter ${JSON.stringify(opened.adapter)}; features ${opened.features.join(" ")}\n`);
  } catch (e) {
    loadError = `cannot serve ${options.file}:${options.name}: ${e.message}`;
  }
}
const code = await new Server(kernel, declared, channel, loadError).run();
killBrowser();
process.exit(code);
