// Type declarations of the ESM entry point (index.mjs): the same names as
// index.d.ts, and the CommonJS module object as the default export.
export * from './index.js';
import * as cjs from './index.js';
declare const _default: typeof cjs;
export default _default;
