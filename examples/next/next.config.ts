import type { NextConfig } from "next";

const config: NextConfig = {
  // The app sits inside the library's repository, whose own lockfile would otherwise make Next
  // take the repository as the workspace root.
  turbopack: { root: import.meta.dirname },
  outputFileTracingRoot: import.meta.dirname,
};

export default config;
