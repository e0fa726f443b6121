// Builds the console into dist/, which the Python package ships and FastAPI serves at /.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/",
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
