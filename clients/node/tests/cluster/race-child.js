'use strict';
// One of the processes racing on one key (cluster.test.js): waits until
// START_AT (unix ms), then runs client.idempotent(scope, key, work); the
// work appends this process's id to OUT_FILE, takes a while, and returns
// it. Prints the helper's result as one JSON line.
//   node race-child.js NODES SCOPE KEY OUT_FILE START_AT NAME

const fs = require('node:fs');
const { Client } = require('../..');

const [nodes, scope, key, outFile, startAt, name] = process.argv.slice(2);

(async () => {
  const client = new Client({ nodes: nodes.split(','), timeoutMs: 5000 });
  const wait = Number(startAt) - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const result = await client.idempotent(scope, key, async () => {
    fs.appendFileSync(outFile, `${name}\n`);
    await new Promise((r) => setTimeout(r, 800));
    return { ranBy: name, n: 42 };
  }, { lease: '10s', waitMs: 20000, pollMs: 100, executionId: name });
  process.stdout.write(`${JSON.stringify({ name, result })}\n`);
})().catch((e) => {
  process.stderr.write(`${name}: ${e.stack || e}\n`);
  process.exit(1);
});
