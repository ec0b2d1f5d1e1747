'use strict';
// Shared by the test files: the cluster controller's socket
// (clients/testing/with_cluster.py), fake nodes for the unit tests, keys.

const http = require('node:http');
const net = require('node:net');
const crypto = require('node:crypto');

/** The environment with_cluster.py gives, or null outside it. */
function clusterEnv() {
  const h = process.env.ONCE_TEST_HTTP;
  if (!h) return null;
  return {
    http: h.split(','),
    control: process.env.ONCE_TEST_CONTROL,
    ca: process.env.ONCE_TEST_CA,
    tenantCert: process.env.ONCE_TEST_TENANT_CERT,
    tenantKey: process.env.ONCE_TEST_TENANT_KEY,
    adminCert: process.env.ONCE_TEST_ADMIN_CERT,
    adminKey: process.env.ONCE_TEST_ADMIN_KEY,
  };
}

/** One request to the control socket: resolves to its answer, rejects on
 * {"ok":false}. */
function control(req, timeoutMs = 90000) {
  const path = process.env.ONCE_TEST_CONTROL;
  return new Promise((resolve, reject) => {
    const s = net.connect(path);
    let buf = '';
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error(`control ${JSON.stringify(req)}: no answer in ${timeoutMs} ms`));
    }, timeoutMs);
    s.on('connect', () => s.write(`${JSON.stringify(req)}\n`));
    s.on('data', (d) => {
      buf += d.toString('utf8');
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(t);
      s.end();
      const ans = JSON.parse(buf.slice(0, nl));
      if (ans.ok) resolve(ans);
      else reject(new Error(`control ${JSON.stringify(req)}: ${ans.error}`));
    });
    s.on('error', (e) => {
      clearTimeout(t);
      reject(e);
    });
  });
}

/** A key no other test (or run) uses. */
function uniq(prefix = 'k') {
  return `${prefix}-${crypto.randomBytes(6).toString('hex')}`;
}

/**
 * A fake node on 127.0.0.1: @handler(req, body, n) answers with
 * { status, body (object or string) } or { destroy: true } (the connection
 * cut after the request arrived), or { hang: true }. requests: every
 * request seen, { method, url, body (parsed JSON or undefined) }.
 */
async function fakeNode(handler) {
  const requests = [];
  const sockets = new Set();
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
      const r = { method: req.method, url: req.url, body, contentType: req.headers['content-type'] };
      requests.push(r);
      const a = handler(r, requests.length) || {};
      if (a.destroy) {
        req.socket.destroy();
        return;
      }
      if (a.hang) return;
      const out = typeof a.body === 'string' ? a.body : `${JSON.stringify(a.body || {})}\n`;
      res.writeHead(a.status || 200, { 'content-type': 'application/json' });
      res.end(out);
    });
  });
  server.on('connection', (s) => {
    s.unref();
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    requests,
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A base URL where nothing listens (a port just freed). */
async function deadUrl() {
  const s = net.createServer();
  await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = s.address().port;
  await new Promise((resolve) => s.close(resolve));
  return `http://127.0.0.1:${port}`;
}

const CLUSTER_ID = '4f22dfea80a4e29cc6be38aa8c381040';
const OTHER_CLUSTER_ID = '00112233445566778899aabbccddeeff';

/** A decided claim answer as a node writes it, for @requestId. */
function accepted(requestId, extra = {}) {
  return {
    outcome: 'ACCEPTED', retry: false, log_time_ms: 1796620721235, request_id: requestId,
    first_request_id: requestId, first_index: 18, first_time_ms: 1796620721235, attempts_total: 0,
    kind: 'NONCE', state: 'SEEN', expires_ms: 1796707121235, cluster_id: CLUSTER_ID,
    node_id: 'bc38860fb16c771b', boot_id: '1f6abd3dcee6cffbde0e4cafd30b281a', ...extra,
  };
}

function errorAnswer(error, applied, requestId, extra = {}) {
  return {
    error, applied, leader_hint: '', message: `test: ${error}`, request_id: requestId,
    cluster_id: CLUSTER_ID, node_id: 'bc38860fb16c771b', boot_id: '1f6abd3dcee6cffbde0e4cafd30b281a', ...extra,
  };
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

module.exports = {
  clusterEnv, control, uniq, fakeNode, deadUrl, CLUSTER_ID, OTHER_CLUSTER_ID, accepted, errorAnswer, sleep,
};
