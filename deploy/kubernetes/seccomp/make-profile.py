#!/usr/bin/env python3
"""make-profile.py: write once-uring.json, the seccomp profile of onced's
pods: the container runtimes' default profile (Debian 12's
golang-github-containers-common /usr/share/containers/seccomp.json, the
moby-derived allow list, Apache-2.0) plus io_uring_setup, io_uring_enter
and io_uring_register, which that default refuses and onced's uring store
needs (docs/store.md). Nothing else is added.

Usage: make-profile.py [SOURCE [OUT]] (defaults: the file above, and
once-uring.json next to this script). Run it again when the base moves."""

import json
import os
import sys

URING = ["io_uring_enter", "io_uring_register", "io_uring_setup"]


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else \
        "/usr/share/containers/seccomp.json"
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "once-uring.json")
    with open(src) as f:
        prof = json.load(f)
    if prof.get("defaultAction") != "SCMP_ACT_ERRNO":
        sys.exit("%s: defaultAction is not SCMP_ACT_ERRNO: not an allow list"
                 % src)
    for rule in prof["syscalls"]:
        if rule.get("action") == "SCMP_ACT_ALLOW" and not rule.get("args") \
                and not rule.get("includes") and not rule.get("excludes"):
            rule["names"] = sorted(set(rule["names"]) | set(URING))
            break
    else:
        prof["syscalls"].insert(0, {"names": URING,
                                    "action": "SCMP_ACT_ALLOW"})
    with open(out, "w") as f:
        json.dump(prof, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
