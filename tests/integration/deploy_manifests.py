#!/usr/bin/env python3
"""deploy_manifests.py [SRCDIR]: check the deployment files for the fields
deploy/README.md relies on (SRCDIR: default $top_srcdir, else "."). Each
check prints PASS or FAIL; exit 1 if any failed, 77 without PyYAML. What it
checks:

  kubernetes/  the kustomization's resources parse; the StatefulSet is
               Parallel with one volume claim template, governed by the
               headless Service, probes /readyz (readiness) and /healthz
               (liveness, startup) on the named http port, over HTTPS
               when the TLS secret is mounted (onced's HTTP port is then
               HTTPS), requests and
               limits for cpu and memory, runs as non-root with no
               privilege escalation, a Localhost seccomp profile that
               exists and allows io_uring, the TLS secret mounted where
               ONCE_TLS_DIR points, POD_IP from status.podIP, the
               entrypoint and a preStop hook that are the image's scripts;
               one per-pod Service per replica selecting exactly that pod,
               with the raft and client ports; a client Service; a PDB with
               maxUnavailable 1 on the pods' labels; a NetworkPolicy whose
               every rule that opens the Raft port admits only member pods.
  image/       the Containerfile starts from Debian 12, runs as a numeric
               non-root user, and installs the runtime packages that
               build-offline.sh installs; the scripts' install paths match.
  systemd/     onced@.service is Type=notify with the hardening options;
               systemd-analyze verify prints nothing (when installed).
  scripts      shellcheck is clean (when installed).
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

FAILED = []
PASSED = [0]


def check(ok, what, detail=""):
    if ok:
        PASSED[0] += 1
        print("PASS: %s" % what)
    else:
        FAILED.append(what)
        print("FAIL: %s%s" % (what, (" (%s)" % detail) if detail else ""))


def load_kustomization(kdir):
    with open(os.path.join(kdir, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    objs = []
    for r in k.get("resources", []):
        with open(os.path.join(kdir, r)) as f:
            objs += [d for d in yaml.safe_load_all(f) if d]
    return k, objs


def by_kind(objs, kind):
    return [o for o in objs if o.get("kind") == kind]


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def port_of(container, name):
    for p in container.get("ports", []):
        if p.get("name") == name:
            return p["containerPort"]
    return None


def check_statefulset(kdir, sts, services):
    spec = sts["spec"]
    tpl = spec["template"]
    pod = tpl["spec"]
    labels = tpl["metadata"]["labels"]
    check(spec.get("podManagementPolicy") == "Parallel",
          "StatefulSet: podManagementPolicy Parallel")
    vct = spec.get("volumeClaimTemplates", [])
    check(len(vct) == 1 and "ReadWriteOnce" in vct[0]["spec"]["accessModes"],
          "StatefulSet: one ReadWriteOnce volume claim template per pod")
    headless = [s for s in services if s["spec"].get("clusterIP") == "None"]
    check(len(headless) == 1 and
          spec.get("serviceName") == headless[0]["metadata"]["name"],
          "StatefulSet: serviceName is the headless Service")
    check(spec.get("selector", {}).get("matchLabels", {}).items()
          <= labels.items(), "StatefulSet: selector matches the pod labels")
    cs = pod["containers"]
    check(len(cs) == 1, "StatefulSet: one container")
    c = cs[0]
    http = port_of(c, "http")
    # TLS on (a secret volume): the HTTP port is HTTPS, and a probe over
    # plain HTTP would never pass.
    scheme = "HTTPS" if any("secret" in v for v in
                            pod.get("volumes", [])) else "HTTP"
    for probe, path in (("readinessProbe", "/readyz"),
                        ("livenessProbe", "/healthz"),
                        ("startupProbe", "/healthz")):
        g = c.get(probe, {}).get("httpGet", {})
        check(g.get("path") == path and g.get("port") in ("http", http)
              and g.get("scheme", "HTTP") == scheme,
              "StatefulSet: %s GET %s on the http port over %s"
              % (probe, path, scheme), g)
    check(http is not None and port_of(c, "raft") and port_of(c, "client"),
          "StatefulSet: ports client, raft and http named")
    res = c.get("resources", {})
    for k in ("requests", "limits"):
        check(all(x in res.get(k, {}) for x in ("cpu", "memory")),
              "StatefulSet: resources.%s has cpu and memory" % k)
    psc = pod.get("securityContext", {})
    csc = c.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True and psc.get("runAsUser", 0) != 0,
          "StatefulSet: runs as a non-root user")
    check(csc.get("allowPrivilegeEscalation") is False and
          csc.get("capabilities", {}).get("drop") == ["ALL"],
          "StatefulSet: no privilege escalation, every capability dropped")
    sp = psc.get("seccompProfile", {})
    check(sp.get("type") == "Localhost", "StatefulSet: Localhost seccomp")
    prof = os.path.join(kdir, "seccomp",
                        os.path.basename(sp.get("localhostProfile", "")))
    check(os.path.isfile(prof), "seccomp: the profile named is in "
          "deploy/kubernetes/seccomp", prof)
    if os.path.isfile(prof):
        with open(prof) as f:
            p = json.load(f)
        allowed = set()
        for r in p.get("syscalls", []):
            if r.get("action") == "SCMP_ACT_ALLOW" and not r.get("args"):
                allowed |= set(r["names"])
        check(p.get("defaultAction") == "SCMP_ACT_ERRNO",
              "seccomp: an allow list (default SCMP_ACT_ERRNO)")
        check({"io_uring_setup", "io_uring_enter", "io_uring_register"}
              <= allowed, "seccomp: io_uring_setup/enter/register allowed")
        check({"read", "write", "fsync", "epoll_wait", "accept4"} <= allowed,
              "seccomp: the ordinary calls allowed")
    env = env_of(c)
    check(env.get("POD_IP", {}).get("valueFrom", {}).get("fieldRef", {})
          .get("fieldPath") == "status.podIP",
          "StatefulSet: POD_IP from status.podIP (the listen address)")
    check("ONCE_STORAGE" in env, "StatefulSet: ONCE_STORAGE is there to set "
          "pwrite under RuntimeDefault")
    check(env.get("ONCE_REPLICAS", {}).get("value") == str(spec["replicas"]),
          "StatefulSet: ONCE_REPLICAS equals replicas")
    check(env.get("ONCE_BOOTSTRAP", {}).get("value") in ("0", "1"),
          "StatefulSet: ONCE_BOOTSTRAP explicit")
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    tls = [n for n, v in vols.items() if "secret" in v]
    tls_dir = env.get("ONCE_TLS_DIR", {}).get("value", "/etc/once/tls")
    check(len(tls) == 1 and mounts.get(tls[0], {}).get("mountPath") == tls_dir
          and mounts[tls[0]].get("readOnly") is True,
          "StatefulSet: the TLS secret mounted read-only at ONCE_TLS_DIR")
    check(mounts.get(vct[0]["metadata"]["name"], {}).get("mountPath") ==
          env.get("ONCE_DATA_DIR", {}).get("value", "/var/lib/once"),
          "StatefulSet: the volume at ONCE_DATA_DIR")
    check(c.get("command") == ["/usr/lib/once/entrypoint.sh"],
          "StatefulSet: the image's entrypoint")
    pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {})
    check(pre.get("command") == ["/usr/lib/once/prestop.sh"],
          "StatefulSet: preStop is prestop.sh (leadership transfer only)")
    return labels, spec["replicas"], c


def check_members(services, labels, replicas, c, sts_name):
    per_pod = {}
    for s in services:
        sel = s["spec"].get("selector", {})
        if "statefulset.kubernetes.io/pod-name" in sel:
            per_pod[s["metadata"]["name"]] = s
    for i in range(replicas):
        name = "%s-member-%d" % (sts_name, i)
        s = per_pod.get(name)
        check(s is not None, "per-pod Service %s exists" % name)
        if s is None:
            continue
        sp = s["spec"]
        check(sp["selector"] == {"statefulset.kubernetes.io/pod-name":
                                 "%s-%d" % (sts_name, i)},
              "%s selects exactly pod %s-%d" % (name, sts_name, i))
        check(sp.get("clusterIP") in (None, "") and
              sp.get("type", "ClusterIP") == "ClusterIP",
              "%s has a ClusterIP (the stable address)" % name)
        check(sp.get("publishNotReadyAddresses") is True,
              "%s reaches a pod that is not ready yet" % name)
        ports = {p["name"]: p for p in sp.get("ports", [])}
        for pn in ("raft", "client"):
            check(pn in ports and ports[pn]["port"] == port_of(c, pn) and
                  ports[pn].get("targetPort") in (pn, port_of(c, pn)),
                  "%s: port %s matches the container" % (name, pn))
    client = [s for s in services
              if s["spec"].get("clusterIP") != "None" and
              s["spec"].get("selector", {}).items() <= labels.items() and
              "statefulset.kubernetes.io/pod-name" not in s["spec"]["selector"]]
    check(len(client) == 1 and [p["name"] for p in client[0]["spec"]["ports"]]
          == ["client"], "a client Service with only the client port")


def check_pdb(objs, labels):
    pdbs = by_kind(objs, "PodDisruptionBudget")
    check(len(pdbs) == 1 and pdbs[0]["spec"].get("maxUnavailable") == 1,
          "PodDisruptionBudget maxUnavailable 1")
    if pdbs:
        check(pdbs[0]["spec"]["selector"]["matchLabels"].items()
              <= labels.items(), "PodDisruptionBudget selects the pods")


def check_netpol(objs, labels, c):
    nps = by_kind(objs, "NetworkPolicy")
    check(len(nps) == 1, "one NetworkPolicy")
    if not nps:
        return
    sp = nps[0]["spec"]
    check(sp["podSelector"]["matchLabels"].items() <= labels.items() and
          "Ingress" in sp.get("policyTypes", []),
          "NetworkPolicy: ingress policy on the members")
    raft = port_of(c, "raft")
    opened = False
    for rule in sp.get("ingress", []):
        ports = [p.get("port") for p in rule.get("ports", [])]
        if not rule.get("ports") or raft in ports or "raft" in ports:
            opened = True
            members_only = bool(rule.get("from")) and all(
                set(f.keys()) == {"podSelector"} and
                f["podSelector"].get("matchLabels", {}).items()
                <= labels.items() for f in rule["from"])
            check(members_only, "NetworkPolicy: a rule opening the Raft port "
                  "admits only member pods", rule)
    check(opened, "NetworkPolicy: the Raft port is opened to the members")


def check_kubectl(kdir, objs):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("SKIP: kubectl not installed: no kustomize build compared")
        return
    p = subprocess.run([kubectl, "kustomize", kdir], capture_output=True,
                       timeout=60)
    if p.returncode != 0:
        print("SKIP: kubectl kustomize failed: %s" %
              p.stderr.decode("utf-8", "replace").strip()[:200])
        return
    built = [d for d in yaml.safe_load_all(p.stdout) if d]
    key = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
    check(sorted((o["kind"], o["metadata"]["name"]) for o in built) == key,
          "kubectl kustomize builds the same objects")


def runtime_pkgs_containerfile(text):
    stage = text[text.rindex("\nFROM "):]
    m = re.search(r"--no-install-recommends(.*?)&&", stage, re.S)
    return set(m.group(1).replace("\\", " ").split()) if m else set()


def check_image(src):
    d = os.path.join(src, "deploy", "image")
    with open(os.path.join(d, "Containerfile")) as f:
        cf = f.read()
    froms = re.findall(r"^FROM\s+(\S+)", cf, re.M)
    check(froms and all(re.search(r"debian:12", x) for x in froms),
          "Containerfile: every stage FROM Debian 12", froms)
    users = re.findall(r"^USER\s+(\S+)", cf, re.M)
    check(users and users[-1].split(":")[0] not in ("0", "root"),
          "Containerfile: runs as a non-root user", users)
    check('ENTRYPOINT ["/usr/lib/once/entrypoint.sh"]' in cf,
          "Containerfile: the entrypoint")
    with open(os.path.join(d, "build-offline.sh")) as f:
        bo = f.read()
    m = re.search(r'^pkgs="([^"]*)"', bo, re.M)
    offline = set(m.group(1).split(",")) if m else set()
    check(offline and offline == runtime_pkgs_containerfile(cf),
          "build-offline.sh installs the Containerfile's runtime packages",
          "%s vs %s" % (sorted(offline), sorted(runtime_pkgs_containerfile(cf))))
    with open(os.path.join(d, "install-tree.sh")) as f:
        it = f.read()
    for s in ("entrypoint.sh", "prestop.sh"):
        check("/usr/lib/once/%s" % s in it and
              os.access(os.path.join(d, s), os.X_OK),
              "install-tree.sh installs %s (executable)" % s)


def check_systemd(src):
    p = os.path.join(src, "deploy", "systemd", "onced@.service")
    with open(p) as f:
        unit = f.read()
    want = ("Type=notify", "NoNewPrivileges=yes", "ProtectSystem=strict",
            "PrivateTmp=yes", "ProtectHome=yes", "PrivateDevices=yes",
            "CapabilityBoundingSet=", "RestartPreventExitStatus=2 3",
            "EnvironmentFile=/etc/once/%i.env", "StateDirectory=once/%i",
            "WatchdogSec=60s")
    lines = set(ln.strip() for ln in unit.splitlines())
    for w in want:
        check(w in lines, "onced@.service: %s" % w)
    check(re.search(r"SystemCallFilter=.*io_uring_setup", unit) is not None,
          "onced@.service: io_uring allowed by the syscall filter")
    sa = shutil.which("systemd-analyze")
    if sa is None:
        print("SKIP: systemd-analyze not installed")
        return
    with tempfile.TemporaryDirectory() as tmp:
        stub = os.path.join(tmp, "onced-stub")
        with open(stub, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(stub, 0o755)
        with open(os.path.join(tmp, "onced@.service"), "w") as f:
            f.write(unit.replace("/usr/bin/onced", stub))
        r = subprocess.run([sa, "verify", "--man=no",
                            os.path.join(tmp, "onced@check.service")],
                           capture_output=True, timeout=60)
        out = (r.stdout + r.stderr).decode("utf-8", "replace").strip()
        check(r.returncode == 0 and out == "",
              "systemd-analyze verify onced@.service: clean", out)


def check_shell(src):
    sc = shutil.which("shellcheck")
    if sc is None:
        print("SKIP: shellcheck not installed")
        return
    d = os.path.join(src, "deploy", "image")
    files = [os.path.join(d, f) for f in sorted(os.listdir(d))
             if f.endswith(".sh")]
    r = subprocess.run([sc, "-s", "sh"] + files, capture_output=True,
                       timeout=120)
    check(r.returncode == 0, "shellcheck deploy/image/*.sh",
          r.stdout.decode("utf-8", "replace")[:2000])


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else \
        os.environ.get("top_srcdir", ".")
    kdir = os.path.join(src, "deploy", "kubernetes")
    _, objs = load_kustomization(kdir)
    check(len(objs) > 0, "kustomization resources parse")
    stss = by_kind(objs, "StatefulSet")
    check(len(stss) == 1, "one StatefulSet")
    services = by_kind(objs, "Service")
    labels, replicas, c = check_statefulset(kdir, stss[0], services)
    check_members(services, labels, replicas, c, stss[0]["metadata"]["name"])
    check_pdb(objs, labels)
    check_netpol(objs, labels, c)
    check_kubectl(kdir, objs)
    check_image(src)
    check_systemd(src)
    check_shell(src)
    print("deploy-manifests: %d passed, %d failed" % (PASSED[0], len(FAILED)))
    for f in FAILED:
        print("  failed: %s" % f)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
