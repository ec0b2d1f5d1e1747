#!/usr/bin/env python3
"""once_tls.py: TLS on both ports, the hardened Raft port, SIGHUP, --insecure.

Certificates are made by scripts/make-certs.sh (the openssl CLI) in the work
directory: a CA with node certificates a, b, c (IP SAN 127.0.0.1, DNS
NAME.once.test) and a client "ops"; a second CA "ca2" with a node "rogue"
and a client "intruder"; an expired node certificate "old" of the first CA.

  1. --insecure rules: a non-loopback address without TLS is refused
     (exit 2, the flag named; --http-addr too); with --insecure the node gets past the check
     and says it serves plaintext off loopback;
  2. plaintext 3-node cluster: raw TCP connections to a follower's Raft
     port that send garbage, a huge header length, an AppendEntries entry
     over the message bound, an InstallSnapshot over the snapshot bound, a
     RequestVote shorter than raft reads, a configuration that runs past
     its buffer: each is closed by the node, which logs why and keeps
     serving (claims through it are ACCEPTED);
  3. a TLS 3-node cluster (--tls-cert/--tls-key/--tls-ca; joins, Raft and
     forwarding all over TLS) serves claims through oncectl --tls-* via
     every node;
  4. refused at the handshake, not applied (exit 3): a client certificate of
     another CA, an expired one, none at all, and a client that does not
     trust the node's CA; a plaintext oncectl gets no decision and the node
     logs the plaintext; a raw plaintext frame is closed;
  5. the TLS Raft port: garbage (not TLS), a peer certificate of another
     CA, and a valid peer certificate followed by a huge header length are
     all closed, the node keeps serving;
  6. a connection that sends nothing is closed by the handshake deadline,
     on both ports;
  7. SIGHUP: a new certificate in the same files is served to new
     connections (its serial seen by a fresh handshake) while claims go on;
     an unreadable certificate file is refused with a log line and the old
     certificate stays;
  8. --peer-tls-ca apart from --tls-ca: a client of the client CA is
     served, a forwarded call from it is PERMISSION_DENIED, one from a
     certificate of the peer CA is served.
"""

import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import once_hostile as oh  # noqa: E402  (its envelope encoder and decoder)

SCOPE = "tls"
RAFT_AE, RAFT_RV, RAFT_IS = 1, 3, 5


def make_certs(t, d):
    oc.make_certs(d, [("ca",), ("client", "ops"),
                      ("expired", "old", "127.0.0.1")] +
                  [("node", n, "127.0.0.1", n + ".once.test")
                   for n in ("a", "b", "c")])
    oc.make_certs(d, [("ca", "ca2"), ("node", "rogue", "127.0.0.1"),
                      ("client", "intruder")], ca="ca2")
    # a peer CA of its own (step 8)
    oc.make_certs(d, [("ca", "pca"), ("node", "p", "127.0.0.1", "p.once.test")],
                  ca="pca")
    t.check(True, "certificates made with scripts/make-certs.sh")


def le64(*vals):
    return b"".join(struct.pack("<Q", v) for v in vals)


def raft_handshake():
    addr = b"127.0.0.1:9\x00"
    addr += b"\x00" * (-len(addr) % 8)
    return le64(1, 42, len(addr)) + addr


def hostile_raft_messages():
    hs = raft_handshake()
    conf = b"\x01" + le64(5)  # five servers announced, none present
    return [
        ("garbage", os.urandom(4096)),
        ("a header length of 2^62", hs + le64(RAFT_AE, 1 << 62)),
        ("an entry over the message bound",
         hs + le64(RAFT_AE, 56) + le64(1, 0, 0, 0, 1) +
         le64(1) + bytes([1, 0, 0, 0]) + struct.pack("<I", 0xFFFFFFF8) +
         le64(0)),
        ("an InstallSnapshot over the snapshot bound",
         hs + le64(RAFT_IS, 40 + 16 + 8) + le64(1, 1, 1, 1, 16) +
         b"\x01" + le64(0) + b"\x00" * 7 + le64(1 << 50)),
        ("a RequestVote of 8 bytes", hs + le64(RAFT_RV, 8) + le64(0)),
        ("a configuration past its buffer",
         hs + le64(RAFT_IS, 40 + 16 + 8) + le64(1, 1, 1, 1, 16) +
         conf + b"\x00" * 7 + le64(8)),
    ]


def closed_by_peer(sock, timeout=5):
    """True if the node closes the connection within @timeout."""
    sock.settimeout(timeout)
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            if sock.recv(4096) == b"":
                return True
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError) \
            as e:
        return not isinstance(e, socket.timeout)
    return False


def send_raw(port, data, wrap=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if wrap is not None:
        s = wrap.wrap_socket(s, server_hostname="127.0.0.1")
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
        pass
    return s


def serves(c, n, key):
    return c.claim(SCOPE, key, [n], "--ttl", "1m").is_outcome("ACCEPTED")


def raft_port_attacks(t, c, victim, label, wrap=None):
    for what, data in hostile_raft_messages():
        s = send_raw(victim.raft_port, data, wrap)
        t.check(closed_by_peer(s), "%s Raft port: %s is dropped"
                % (label, what))
        s.close()
        t.check(victim.alive() and serves(c, victim, "after-%s-%s" % (
            label, what.replace(" ", "-"))),
            "%s: %s keeps serving after %s" % (label, victim.name, what))
    t.check("closing a Raft inbound link" in victim.log_text(),
            "%s: the node logs why it closed Raft links" % label)


def insecure_rules(t, d):
    bad = [t.onced, "--data-dir", os.path.join(d, "insecure"),
           "--raft-addr", "10.255.255.1:8001", "--client-addr",
           "127.0.0.1:8002", "--bootstrap"]
    p = subprocess.run(bad, capture_output=True, timeout=30,
                       env=t.child_env)
    t.check(p.returncode == 2 and b"--raft-addr" in p.stderr and
            b"without TLS" in p.stderr,
            "plaintext on a non-loopback address is refused (exit 2)",
            "rc=%s stderr=%r" % (p.returncode, p.stderr[-300:]))
    p = subprocess.run(bad + ["--insecure"], capture_output=True,
                       timeout=30, env=t.child_env)
    t.check(p.returncode == 1 and b"serving without TLS on a non-loopback"
            in p.stderr,
            "--insecure passes the check and warns (then the bind fails)",
            "rc=%s stderr=%r" % (p.returncode, p.stderr[-400:]))
    p = subprocess.run([t.onced, "--data-dir", os.path.join(d, "insecure"),
                        "--raft-addr", "127.0.0.1:8001", "--client-addr",
                        "127.0.0.1:8002", "--http-addr", "10.255.255.1:8003",
                        "--bootstrap"], capture_output=True, timeout=30,
                       env=t.child_env)
    t.check(p.returncode == 2 and b"--http-addr" in p.stderr and
            b"without TLS" in p.stderr,
            "plaintext HTTP on a non-loopback --http-addr is refused (exit 2)",
            "rc=%s stderr=%r" % (p.returncode, p.stderr[-300:]))
    p = subprocess.run(bad[:-1] + ["--tls-cert", "x"], capture_output=True,
                       timeout=30, env=t.child_env)
    t.check(p.returncode == 2 and b"go together" in p.stderr,
            "--tls-cert alone is refused (exit 2)",
            "rc=%s stderr=%r" % (p.returncode, p.stderr[-300:]))


def plain_cluster(t):
    c = oc.Cluster(t, "plain", 8000)
    nodes = c.start_cluster(["a", "b", "c"])
    leader = c.wait_leader(nodes)
    victim = [n for n in nodes if n is not leader][0]
    raft_port_attacks(t, c, victim, "plaintext")
    t.stop_all(check=True)


# With TLS every caller needs a role: the nodes are members, ops is admin.
ACCESS = {"identities": [{"match": "dns:*.once.test", "role": "member"},
                         {"match": "dns:ops", "role": "admin"}]}


def tls_flags(d, name):
    path = os.path.join(d, "access.json")
    if not os.path.exists(path):
        with open(path, "w") as f:
            json.dump(ACCESS, f)
    return ["--tls-cert", os.path.join(d, name + ".pem"),
            "--tls-key", os.path.join(d, name + ".key"),
            "--tls-ca", os.path.join(d, "ca.pem"), "--access", path]


def ctl_tls(d, ca="ca", cert="ops"):
    f = ["--tls-ca", os.path.join(d, ca + ".pem")]
    if cert:
        f += ["--tls-cert", os.path.join(d, cert + ".pem"),
              "--tls-key", os.path.join(d, cert + ".key")]
    return f


def refused_clients(t, c, d, n):
    cases = [("a client certificate of another CA",
              ctl_tls(d, cert="intruder"), "unknown ca"),
             ("an expired client certificate", ctl_tls(d, cert="old"),
              "expired"),
             ("no client certificate", ctl_tls(d, cert=None),
              "certificate required"),
             ("a client that does not trust the node's CA",
              ctl_tls(d, ca="ca2"), "certificate")]
    for what, flags, word in cases:
        c.ctl_flags = flags
        before = n.log_text().count("TLS refused")
        r = c.claim(SCOPE, "refused-" + what.replace(" ", "-"), [n],
                    "--ttl", "1m", timeout="2s")
        # The reason is in the message unless the deadline cut the last
        # attempt short; then the node's log shows the refusals.
        why = word in (r.get("message") or "") or \
            n.log_text().count("TLS refused") > before
        t.check(r.rc == oc.RC_NOT_APPLIED and r.get("applied") == "false"
                and why, "refused at the handshake, not applied: %s" % what,
                r.describe())
    c.ctl_flags = []
    r = c.claim(SCOPE, "plaintext-client", [n], "--ttl", "1m",
                timeout="1s")
    t.check(not r.accepted and "not a TLS handshake" in n.log_text(),
            "a plaintext oncectl gets no decision; the node logs it",
            r.describe())
    s = send_raw(n.client_port, struct.pack(">I", 4) + b"\x08\x01\x10\x06")
    t.check(closed_by_peer(s), "a raw plaintext frame is closed")
    s.close()
    c.ctl_flags = ctl_tls(d)


def peer_context(d, name):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(os.path.join(d, "ca.pem"))
    ctx.load_cert_chain(os.path.join(d, name + ".pem"),
                        os.path.join(d, name + ".key"))
    return ctx


def tls_raft_port(t, c, d, victim):
    s = send_raw(victim.raft_port, os.urandom(2048))
    t.check(closed_by_peer(s), "TLS Raft port: plaintext garbage is dropped")
    s.close()
    ok = False
    try:
        s = send_raw(victim.raft_port, raft_handshake(),
                     peer_context(d, "rogue"))
        ok = closed_by_peer(s)
        s.close()
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        ok = True
    t.check(ok, "TLS Raft port: a peer certificate of another CA is refused")
    s = send_raw(victim.raft_port, raft_handshake() + le64(RAFT_AE, 1 << 62),
                 peer_context(d, "a"))
    t.check(closed_by_peer(s),
            "TLS Raft port: a member's huge header length is dropped")
    s.close()
    t.check(victim.alive() and serves(c, victim, "after-tls-raft"),
            "TLS: %s keeps serving after the Raft port attacks"
            % victim.name)


def served_serial(d, port):
    ctx = peer_context(d, "ops")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            der = s.getpeercert(binary_form=True)
    p = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout",
                        "-serial"], input=der, capture_output=True)
    return p.stdout.decode().strip()


def file_serial(path):
    p = subprocess.run(["openssl", "x509", "-in", path, "-noout", "-serial"],
                       capture_output=True)
    return p.stdout.decode().strip()


def sighup(t, c, d, n):
    script = os.path.join(os.environ.get("top_srcdir", "."), "scripts",
                          "make-certs.sh")
    old = served_serial(d, n.client_port)
    t.check(old == file_serial(os.path.join(d, n.name + ".pem")),
            "the node serves the certificate of its files", old)
    subprocess.run(["sh", script, "node", d, n.name, "127.0.0.1",
                    n.name + ".once.test"],
                   check=True, capture_output=True)
    new = file_serial(os.path.join(d, n.name + ".pem"))
    n.proc.send_signal(oc.signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline and \
            "SIGHUP: reloaded" not in n.log_text():
        time.sleep(0.1)
    t.check(served_serial(d, n.client_port) == new != old,
            "SIGHUP: new connections get the new certificate",
            "old=%s new=%s" % (old, new))
    t.check(serves(c, n, "after-sighup"), "claims go on after the reload")
    pem = os.path.join(d, n.name + ".pem")
    with open(pem, "rb") as f:
        keep = f.read()
    with open(pem, "wb") as f:
        f.write(b"not a certificate\n")
    n.proc.send_signal(oc.signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline and \
            "reload refused" not in n.log_text():
        time.sleep(0.1)
    t.check("reload refused" in n.log_text(),
            "SIGHUP: a bad certificate file is refused with a log line")
    t.check(served_serial(d, n.client_port) == new and
            serves(c, n, "after-bad-sighup"),
            "SIGHUP: after a refused reload the old certificate stays")
    with open(pem, "wb") as f:
        f.write(keep)


def forwarded_status(d, port, cert):
    """A Status call marked forwarded, over TLS with @cert: its status."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.path.join(d, "pca.pem"))
    ctx.load_cert_chain(os.path.join(d, cert + ".pem"),
                        os.path.join(d, cert + ".key"))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(oh.frame(oh.envelope(7, oh.M_STATUS, forwarded=True)))
            buf = b""
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(
                    ">I", buf[:4])[0]:
                chunk = s.recv(65536)
                if not chunk:
                    return None
                buf += chunk
    return oh.one(oh.decode(buf[4:]), oh.F_STATUS)


def peer_ca(t, d):
    """--peer-tls-ca apart from --tls-ca: clients of the client CA are
    served, and only certificates of the peer CA may forward."""
    c = oc.Cluster(t, "peerca", 8000)
    c.node_extra = lambda n: tls_flags(d, n.name) + [
        "--peer-tls-ca", os.path.join(d, "pca.pem")]
    c.ctl_flags = ctl_tls(d, ca="pca")
    n = c.start_cluster(["p"])[0]
    t.check(serves(c, n, "peer-ca"),
            "--peer-tls-ca: a client of the client CA is served")
    st = forwarded_status(d, n.client_port, "ops")
    t.check(st == 7, "a forwarded call from a non-member is "
            "PERMISSION_DENIED", "status=%s" % st)
    st = forwarded_status(d, n.client_port, "p")
    t.check(st is not None and st != 7,
            "a forwarded call from a member certificate is served",
            "status=%s" % st)
    t.stop_all(check=True)


def scenario(t):
    d = os.path.join(t.work, "certs")
    make_certs(t, d)
    insecure_rules(t, t.work)
    plain_cluster(t)
    c = oc.Cluster(t, "tls", 8000)
    c.node_extra = lambda n: tls_flags(d, n.name)
    c.ctl_flags = ctl_tls(d)
    nodes = c.start_cluster(["a", "b", "c"])
    leader = c.wait_leader(nodes)
    for n in nodes:
        t.check(serves(c, n, "via-" + n.name),
                "TLS cluster: a claim via %s is ACCEPTED" % n.name)
    follower = [n for n in nodes if n is not leader][0]
    # Silent connections, checked at the end: the handshake deadline (10 s)
    # closes them, on both ports.
    silent = [(port, socket.create_connection(("127.0.0.1", port),
                                              timeout=5), time.time())
              for port in (follower.client_port, follower.raft_port)]
    refused_clients(t, c, d, follower)
    tls_raft_port(t, c, d, follower)
    t.check("TLS refused" in follower.log_text(),
            "the node logs the refused handshakes")
    sighup(t, c, d, follower)
    for port, s, t0 in silent:
        left = max(1.0, 20 - (time.time() - t0))
        t.check(closed_by_peer(s, timeout=left),
                "a connection that never starts its handshake is closed "
                "(port %d, after %.1f s)" % (port, time.time() - t0))
        s.close()
    for n in nodes:
        t.check(serves(c, n, "end-via-" + n.name),
                "TLS cluster still serves via %s" % n.name)
    t.stop_all(check=True)
    peer_ca(t, d)


if __name__ == "__main__":
    # Every certificate comes from the openssl CLI (scripts/make-certs.sh).
    if shutil.which("openssl") is None:
        print("openssl not found: skip")
        sys.exit(oc.EXIT_SKIP)
    oc.main("once-tls", scenario)
