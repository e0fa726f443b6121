// Vite turns imported stylesheets into the bundle's CSS file.
declare module "*.css";
