#!/usr/bin/env python3
"""deploy_check.py: the monitoring files under deploy/ are valid and name
only metrics onced exposes.

  * deploy/prometheus/alerts.yml: `promtool check rules`, and `promtool
    test rules alerts_test.yml` (each alert fires on series made for it);
  * deploy/prometheus/prometheus.yml: `promtool check config`, in a copy
    of the directory with the client certificate its tls_config names
    (once-tls/, made by scripts/make-certs.sh: promtool reads the files),
    and the job scrapes over HTTPS with a client certificate (the HTTP
    port of a TLS node, docs/server.md);
  * deploy/grafana/once.json: valid JSON, a dashboard whose every panel has
    targets with a PromQL expression;
  * every once_* metric the alerts and the dashboard use is registered in
    src/server/metrics.c, and every registered family is listed in
    docs/server.md's metrics table.
Exit 0 pass, 1 fail, 77 skip (no promtool).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:  # Debian's python3-yaml: a missing tool is a SKIP
    print("PyYAML (python3-yaml) not found: skip")
    sys.exit(77)

SRC = os.environ.get("top_srcdir") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..")
failures = []


def check(cond, what, detail=""):
    print("%s: %s%s" % ("PASS" if cond else "FAIL", what,
                        (": " + detail) if detail and not cond else ""))
    if not cond:
        failures.append(what)
    return cond


def promtool(args, cwd):
    p = subprocess.run(["promtool"] + args, cwd=cwd, capture_output=True,
                       timeout=120)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def names_in(text):
    """once_* metric names in PromQL text, as families (no _bucket etc.)."""
    out = set()
    for n in re.findall(r"\bonce_[a-z0-9_]+", text):
        for suf in ("_bucket", "_sum", "_count"):
            if n.endswith(suf) and not n.endswith("_total" + suf):
                n = n[: -len(suf)]
                break
        out.add(n)
    return out


def registered():
    with open(os.path.join(SRC, "src/server/metrics.c")) as f:
        text = f.read()
    return set(re.findall(r'"(once_[a-z0-9_]+)"', text))


def check_dashboard(path):
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        check(False, "grafana: once.json is valid JSON", str(e))
        return set()
    check(True, "grafana: once.json is valid JSON")
    panels = d.get("panels") or []
    check(d.get("title") and len(panels) >= 10,
          "grafana: a titled dashboard with its panels (%d)" % len(panels))
    ids = [p.get("id") for p in panels]
    check(len(set(ids)) == len(ids), "grafana: panel ids are unique")
    exprs = []
    for p in panels:
        ts = p.get("targets") or []
        ok = ts and all(t.get("expr") for t in ts)
        check(ok, "grafana: panel %r has PromQL targets" % p.get("title"))
        exprs += [t.get("expr", "") for t in ts]
    return names_in("\n".join(exprs))


def check_scrape_config(prom):
    """promtool check config, with the files its tls_config names."""
    with open(os.path.join(prom, "prometheus.yml")) as f:
        cfg = yaml.safe_load(f)
    jobs = {j["job_name"]: j for j in cfg.get("scrape_configs", [])}
    job = jobs.get("once", {})
    tls = job.get("tls_config", {})
    check(job.get("scheme") == "https" and tls.get("ca_file")
          and tls.get("cert_file") and tls.get("key_file")
          and not tls.get("insecure_skip_verify"),
          "prometheus.yml: job once scrapes over HTTPS with a client "
          "certificate and checks the server's", str(job))
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("prometheus.yml", "alerts.yml"):
            shutil.copy(os.path.join(prom, name), tmp)
        certs = os.path.join(tmp, "certs")
        script = os.path.join(SRC, "scripts", "make-certs.sh")
        for args in (["ca", certs], ["client", certs, "prometheus"]):
            subprocess.run(["sh", script] + args, check=True,
                           capture_output=True)
        for key, src in (("ca_file", "ca.pem"), ("cert_file",
                                                 "prometheus.pem"),
                         ("key_file", "prometheus.key")):
            if tls.get(key):
                dst = os.path.join(tmp, tls[key])
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy(os.path.join(certs, src), dst)
        rc, out = promtool(["check", "config", "prometheus.yml"], tmp)
    check(rc == 0, "promtool check config prometheus.yml", out)


def main():
    if shutil.which("promtool") is None:
        print("promtool not found (scripts/deps.sh installs prometheus): "
              "skip")
        return 77
    prom = os.path.join(SRC, "deploy", "prometheus")
    rc, out = promtool(["check", "rules", "alerts.yml"], prom)
    check(rc == 0, "promtool check rules alerts.yml", out)
    rc, out = promtool(["test", "rules", "alerts_test.yml"], prom)
    check(rc == 0, "promtool test rules alerts_test.yml", out)
    check_scrape_config(prom)
    with open(os.path.join(prom, "alerts.yml")) as f:
        alerts = f.read()
    for a in ("OnceLeaderChanges", "OnceNoLeader", "OnceFsyncSlow",
              "OncePendingOld", "OnceNodeNotReady", "OnceRaftMemberRefused"):
        check("alert: %s" % a in alerts, "alerts.yml has %s" % a)
    have = registered()
    check(len(have) > 30, "metrics.c registers its families (%d)" % len(have))
    used = check_dashboard(os.path.join(SRC, "deploy", "grafana",
                                        "once.json"))
    used |= names_in(alerts)
    unknown = sorted(used - have)
    check(not unknown, "alerts and dashboard use only exposed metrics",
          " ".join(unknown))
    with open(os.path.join(SRC, "docs", "server.md")) as f:
        doc = f.read()
    undocumented = sorted(n for n in have
                          if not re.search(r"`%s[`{]" % re.escape(n), doc))
    check(not undocumented, "docs/server.md lists every exposed metric",
          " ".join(undocumented))
    print("deploy-check: %s, %d failed" % ("FAIL" if failures else "PASS",
                                          len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
