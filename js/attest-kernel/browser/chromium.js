// One headless Chromium for the browser kernel host, through playwright-core (no browser download:
// the system's chromium). The browser dies with the host: on exit, on SIGTERM, SIGINT and SIGHUP,
// and, should the host be killed outright, when its pipe to the browser closes. Its temporary files
// live in a directory of the host's own, removed with the browser.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

export const CHROMIUM = process.env.ATTEST_CHROMIUM ?? "/usr/bin/chromium";
// SwiftShader's Vulkan when there is no GPU; --use-webgpu-adapter=default asks for a real one.
const WEBGPU_ARGS = ["--enable-unsafe-webgpu", `--use-webgpu-adapter=${process.env.ATTEST_WEBGPU_ADAPTER ?? "swiftshader"}`];

/** playwright-core resolved from each of `from` (files) in turn; null when none finds it. */
export async function loadPlaywright(from) {
  for (const file of from) {
    try {
      const module = await import(createRequire(file).resolve("playwright-core"));
      return module.default ?? module;
    } catch (e) {
      if (e.code !== "MODULE_NOT_FOUND") throw e;
    }
  }
  return null;
}

/** The process ids of this process's children named chromium (playwright starts the browser
 * in a process group of its own: killing that group takes the GPU and renderer processes). */
function browserChildren() {
  const children = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[1]) === process.pid && stat.includes("(chrom")) children.push(Number(entry));
    } catch { /* gone meanwhile */ }
  }
  return children;
}

// Playwright's profile and chromium's singleton socket go to TMPDIR; a browser killed outright never
// removes them. Under attest (ATTEST_PROTOCOL_FDS set) TMPDIR is the kernel process's own, which attest
// removes; run alone (--probe), they go to a directory of this host's own, removed after the kill. Not
// one level deeper under attest: the socket's path (TMPDIR/org.chromium.Chromium.XXXXXX/SingletonSocket)
// holds at most 107 bytes, and past that chromium does not start.
let browserTmp = null;

export function killBrowser() {
  for (const pid of browserChildren()) {
    for (const target of [-pid, pid]) {
      try { process.kill(target, "SIGKILL"); } catch { /* already gone */ }
    }
  }
  if (browserTmp !== null) fs.rmSync(browserTmp, { recursive: true, force: true });
  browserTmp = null;
}

/** Kills the browser whenever this process ends, by a signal included. */
export function tieBrowserToProcess() {
  process.on("exit", killBrowser);
  for (const [signal, number] of [["SIGTERM", 15], ["SIGINT", 2], ["SIGHUP", 1]]) {
    process.on(signal, () => {
      killBrowser();
      process.exit(128 + number);
    });
  }
}

export async function launchChromium(playwright) {
  if (process.env.ATTEST_PROTOCOL_FDS === undefined) {
    browserTmp = fs.mkdtempSync(path.join(os.tmpdir(), "attest-browser-"));
    process.env.TMPDIR = browserTmp;  // read by playwright at launch and inherited by the browser
  }
  return playwright.chromium.launch({ executablePath: CHROMIUM, headless: true, args: WEBGPU_ARGS,
    handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false });
}
