// The http server the browser kernel host's page comes from: 127.0.0.1 only, an ephemeral port.
// It serves the page's runtime (this folder) under /host/ and the kernel module's folder under
// /kernel/; nothing outside those two folders, and nothing but GET.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

const TYPES = { ".html": "text/html", ".mjs": "text/javascript", ".js": "text/javascript", ".wgsl": "text/plain",
  ".json": "application/json", ".wasm": "application/wasm" };

/** The file a URL path names inside root, or null when it would leave root. */
function inside(root, relative) {
  const file = path.resolve(root, "." + path.posix.normalize("/" + decodeURIComponent(relative)));
  return file.startsWith(root + path.sep) ? file : null;
}

/** Starts the server; resolves to {origin, close()}. */
export async function servePage(hostDir, kernelDir) {
  const roots = { "/host/": path.resolve(hostDir), "/kernel/": path.resolve(kernelDir) };
  const server = http.createServer((request, response) => {
    const url = new URL(request.url, "http://127.0.0.1");
    const prefix = url.pathname === "/" ? "/host/" : Object.keys(roots).find((p) => url.pathname.startsWith(p));
    const file = prefix && inside(roots[prefix], url.pathname === "/" ? "page.html" : url.pathname.slice(prefix.length));
    if (request.method !== "GET" || !file || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { "content-type": TYPES[path.extname(file)] ?? "application/octet-stream", "cache-control": "no-store" });
    fs.createReadStream(file).pipe(response);
  });
  await new Promise((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.1", resolve));
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}
