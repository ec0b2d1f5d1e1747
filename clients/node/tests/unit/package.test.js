'use strict';
// The package: the declarations match the exports, the ESM entry point
// gives the same objects, the version is the repository's.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..', '..');
const pkg = require('../../package.json');
const cjs = require('../..');
const dts = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8');

function declared(kind) {
  const re = new RegExp(`^export declare ${kind} ([A-Za-z_][A-Za-z0-9_]*)`, 'gm');
  return [...dts.matchAll(re)].map((m) => m[1]);
}

test('every export is declared in index.d.ts, and nothing more', () => {
  const names = [...declared('class'), ...declared('const'), ...declared('function')].sort();
  assert.deepStrictEqual(names, Object.keys(cjs).sort());
  for (const n of declared('class')) assert.strictEqual(typeof cjs[n], 'function', `${n} is a class`);
  for (const n of declared('function')) assert.strictEqual(typeof cjs[n], 'function', `${n} is a function`);
});

test('the declared error classes have the runtime hierarchy', () => {
  const re = /^export declare class (\w+)(?: extends (\w+))? \{/gm;
  const classes = [...dts.matchAll(re)];
  assert.ok(classes.length >= 10);
  for (const [, name, base] of classes) {
    if (base === 'Error') assert.ok(cjs[name].prototype instanceof Error, name);
    else if (base) assert.ok(cjs[name].prototype instanceof cjs[base], `${name} extends ${base}`);
  }
  const e = new cjs.FencedError('x');
  assert.ok(e instanceof cjs.OutcomeError && e instanceof cjs.DefiniteError && e instanceof cjs.OnceError);
  assert.strictEqual(e.name, 'FencedError');
  assert.strictEqual(e.outcome, 'NOT_OWNER');
  assert.ok(new cjs.InProgressError('x') instanceof cjs.NotAppliedError);
  assert.strictEqual(new cjs.OutcomeUnknownError('x').applied, 'unknown');
  assert.strictEqual(new cjs.NotAppliedError('x').applied, 'false');
});

test('the declared literal unions are the runtime constants', () => {
  for (const name of ['Outcome', 'Kind', 'State']) {
    const m = new RegExp(`export declare const ${name}: \\{([^}]*)\\}`).exec(dts);
    assert.ok(m, `${name} declared`);
    const pairs = [...m[1].matchAll(/readonly (\w+): '(\w+)'/g)].map((x) => [x[1], x[2]]);
    assert.deepStrictEqual(Object.fromEntries(pairs), { ...cjs[name] }, name);
    assert.ok(Object.isFrozen(cjs[name]));
  }
});

test('the ESM entry point gives the same objects', async () => {
  const esm = await import(path.join(ROOT, 'index.mjs'));
  for (const k of Object.keys(cjs)) assert.strictEqual(esm[k], cjs[k], k);
  assert.strictEqual(esm.default, cjs);
  const dmts = fs.readFileSync(path.join(ROOT, 'index.d.mts'), 'utf8');
  assert.match(dmts, /export \* from '\.\/index\.js'/);
});

test('package.json: exports, files, engines', () => {
  assert.strictEqual(pkg.name, 'once-client');
  assert.strictEqual(pkg.exports['.'].require.default, './index.js');
  assert.strictEqual(pkg.exports['.'].import.default, './index.mjs');
  for (const f of pkg.files) assert.ok(fs.existsSync(path.join(ROOT, f)), f);
  assert.strictEqual(pkg.engines.node, '>=18');
  assert.strictEqual(pkg.dependencies, undefined, 'no runtime dependencies');
});

test('the version is the repository\'s (configure.ac AC_INIT)', () => {
  const ac = fs.readFileSync(path.join(ROOT, '..', '..', 'configure.ac'), 'utf8');
  const m = /AC_INIT\(\[once\],\s*\[([^\]]+)\]/.exec(ac);
  assert.ok(m, 'AC_INIT found');
  assert.strictEqual(pkg.version, m[1]);
  assert.strictEqual(cjs.VERSION, m[1]);
});
