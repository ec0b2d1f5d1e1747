'use strict';
// One HTTP attempt: send a request to one node and read its whole answer.
// Plain HTTP goes through the global fetch (Node >= 18); HTTPS through
// node:https with an Agent that carries the CA and the client certificate
// (fetch cannot present a client certificate without the undici package).
//
// An attempt either returns { status, text } or throws a TransportError
// whose `sent` says whether the request may have reached the node: false
// only when the connection itself failed (refused, unreachable, a TLS
// handshake refused), so that the call certainly did not apply there.

const fs = require('node:fs');
const https = require('node:https');

class TransportError extends Error {
  constructor(message, sent, timedOut, cause) {
    super(message, cause !== undefined ? { cause } : undefined);
    this.sent = sent;
    this.timedOut = timedOut;
  }
}

// Errors that happen before a connection exists: nothing was sent.
const CONNECT_CODES = new Set([
  'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH',
  'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT', 'ERR_INVALID_IP_ADDRESS',
]);

function errorCode(e) {
  for (let x = e, i = 0; x && i < 4; x = x.cause, i++) {
    if (typeof x.code === 'string') return x.code;
  }
  return undefined;
}

function describe(e) {
  const parts = [];
  for (let x = e, i = 0; x && i < 4; x = x.cause, i++) {
    if (x.message && !parts.includes(x.message)) parts.push(x.message);
  }
  return parts.join(': ') || String(e);
}

/** Read a PEM given as content (string / Buffer) or as a file path. */
function pem(name, content, file) {
  if (content !== undefined && content !== null) {
    if (typeof content !== 'string' && !(content instanceof Uint8Array)) {
      throw new TypeError(`tls.${name}: must be a PEM string or Buffer`);
    }
    return content;
  }
  if (file !== undefined && file !== null) {
    if (typeof file !== 'string') throw new TypeError(`tls.${name}File: must be a path`);
    return fs.readFileSync(file);
  }
  return undefined;
}

class Transport {
  /**
   * @param {object|undefined} tls { ca, cert, key } as PEM content, or
   *   { caFile, certFile, keyFile } as paths (read here, once).
   */
  constructor(tls) {
    this.agent = null;
    if (tls) {
      const ca = pem('ca', tls.ca, tls.caFile);
      const cert = pem('cert', tls.cert, tls.certFile);
      const key = pem('key', tls.key, tls.keyFile);
      if ((cert === undefined) !== (key === undefined)) {
        throw new TypeError('tls: give cert and key together (or neither)');
      }
      this.agent = new https.Agent({
        keepAlive: true,
        ca,
        cert,
        key,
        minVersion: 'TLSv1.3', // the nodes speak TLS 1.3 only
        rejectUnauthorized: true,
      });
    }
  }

  close() {
    if (this.agent) this.agent.destroy();
  }

  /**
   * One attempt. @budgetMs bounds it (then TransportError timedOut, sent
   * true: the request may be in the node's hands); @signal is the caller's.
   */
  request(url, method, bodyText, budgetMs, signal) {
    if (url.startsWith('https:')) {
      return this.httpsRequest(url, method, bodyText, budgetMs, signal);
    }
    return this.fetchRequest(url, method, bodyText, budgetMs, signal);
  }

  async fetchRequest(url, method, bodyText, budgetMs, signal) {
    const ac = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort();
    }, budgetMs);
    const onAbort = () => ac.abort();
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
    try {
      const init = { method, signal: ac.signal, redirect: 'error' };
      if (bodyText !== undefined) {
        init.body = bodyText;
        init.headers = { 'content-type': 'application/json' };
      }
      const res = await fetch(url, init);
      const text = await res.text();
      return { status: res.status, text };
    } catch (e) {
      if (timedOut) throw new TransportError(`no answer within ${budgetMs} ms`, true, true, e);
      if (signal && signal.aborted) throw new TransportError('aborted by the caller', true, false, e);
      const code = errorCode(e);
      throw new TransportError(describe(e), !CONNECT_CODES.has(code), false, e);
    } finally {
      clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', onAbort);
    }
  }

  httpsRequest(url, method, bodyText, budgetMs, signal) {
    return new Promise((resolve, reject) => {
      let done = false;
      let connected = false;
      let timedOut = false;
      let req = null;
      const finish = (err, value) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (signal) signal.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve(value);
      };
      const fail = (e) => {
        if (timedOut) {
          finish(new TransportError(`no answer within ${budgetMs} ms`, connected, true, e));
        } else if (signal && signal.aborted) {
          finish(new TransportError('aborted by the caller', connected, false, e));
        } else {
          const code = errorCode(e);
          finish(new TransportError(describe(e), connected && !CONNECT_CODES.has(code), false, e));
        }
      };
      const timer = setTimeout(() => {
        timedOut = true;
        if (req) req.destroy(new Error('attempt timed out'));
      }, budgetMs);
      const onAbort = () => {
        if (req) req.destroy(new Error('aborted'));
      };
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
      const headers = {};
      if (bodyText !== undefined) {
        headers['content-type'] = 'application/json';
        headers['content-length'] = Buffer.byteLength(bodyText);
      }
      try {
        req = https.request(url, { method, agent: this.agent, headers });
      } catch (e) {
        fail(e);
        return;
      }
      req.on('socket', (sock) => {
        // A kept-alive socket was connected before; a new one once its TLS
        // handshake is done (a refused client certificate fails before).
        if (req.reusedSocket) connected = true;
        else sock.once('secureConnect', () => { connected = true; });
      });
      req.on('error', fail);
      req.on('response', (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', fail);
        res.on('aborted', () => fail(new Error('answer cut short')));
        res.on('end', () => {
          finish(null, { status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') });
        });
      });
      if (bodyText !== undefined) req.end(bodyText);
      else req.end();
    });
  }
}

module.exports = { Transport, TransportError };
