// Builds the console into dist/, which the Python package ships and FastAPI serves at /.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";

import { defineConfig, type Plugin } from "vite";

/** What the build is made from; the Python tests hash the same files the same way. */
const SOURCES = ["src", "index.html", "package-lock.json", "tsconfig.json", "vite.config.ts"];

function files(path: string): string[] {
  return statSync(path).isDirectory()
    ? readdirSync(path).flatMap((name) => files(join(path, name)))
    : [path];
}

/** dist/source.sha256: a digest of the sources, so a test can tell a stale build
 * (sources changed, dist/ not rebuilt) without Node. */
function sourceDigest(): Plugin {
  return {
    name: "spate-source-digest",
    generateBundle() {
      const root = import.meta.dirname;
      const hash = createHash("sha256");
      const paths = SOURCES.flatMap((s) => files(join(root, s)))
        .map((p) => relative(root, p).split(sep).join("/"))
        .sort();
      for (const path of paths) {
        hash.update(`${path}\0`);
        hash.update(readFileSync(join(root, path)));
        hash.update("\0");
      }
      this.emitFile({ type: "asset", fileName: "source.sha256", source: `${hash.digest("hex")}\n` });
    },
  };
}

export default defineConfig({
  base: "/",
  plugins: [sourceDigest()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // The bundle is served by the API and committed: keep it one readable set of files.
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
  },
  server: {
    // `npm run dev` against a local `spate serve` on its default port.
    proxy: { "/api": "http://127.0.0.1:8000" },
  },
});
