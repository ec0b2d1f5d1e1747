"""Logging, ids and the EDN writers shared by the runner and acceptance."""

import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(HERE))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from oncecheck.edn import K, dumps  # noqa: E402,F401

_LOG = [None, "run"]


def set_log(path, name):
    _LOG[0] = open(path, "a") if path else None
    _LOG[1] = name


def log(msg):
    line = "%s %s: %s" % (time.strftime("%H:%M:%S"), _LOG[1], msg)
    print(line, flush=True)
    if _LOG[0] is not None:
        _LOG[0].write(line + "\n")
        _LOG[0].flush()


def rid():
    """A fresh 128-bit request id (hex)."""
    return os.urandom(16).hex()


def edn_value(obj, drop=("id", "exit")):
    """An oncectl JSON object as an EDN map with keyword keys (_ -> -)."""
    out = {}
    for k, v in obj.items():
        if k in drop:
            continue
        out[K(k.replace("_", "-"))] = to_edn(v)
    return out


def to_edn(v):
    if isinstance(v, dict):
        return edn_value(v, drop=())
    if isinstance(v, list):
        return [to_edn(x) for x in v]
    return v


class History:
    """history.edn: one Jepsen op map a line."""

    def __init__(self, path):
        self.f = open(path, "w")
        self.lock = threading.Lock()
        self.index = 0
        self.t0 = time.monotonic_ns()

    def now(self):
        return time.monotonic_ns() - self.t0

    def op(self, typ, process, f, value):
        """Append one op; returns its index. Index order = real-time order
        (the lock covers taking the time, the index and the write)."""
        with self.lock:
            m = {K("index"): self.index, K("time"): self.now(),
                 K("type"): K(typ),
                 K("process"): process if isinstance(process, int) else K(process),
                 K("f"): K(f), K("value"): value}
            self.f.write(dumps(m) + "\n")
            self.f.flush()
            self.index += 1
            return self.index - 1

    def close(self):
        with self.lock:
            if not self.f.closed:
                self.f.close()


class Samples:
    """status.edn: status samples and :dump events (R8-R10)."""

    def __init__(self, path, hist):
        self.f = open(path, "w")
        self.lock = threading.Lock()
        self.hist = hist
        self.n = 0

    def event(self, process, f, value):
        with self.lock:
            if self.f.closed:
                return
            m = {K("type"): K("info"), K("process"): K(process), K("f"): K(f),
                 K("time"): self.hist.now(), K("value"): value}
            self.f.write(dumps(m) + "\n")
            self.f.flush()
            self.n += 1

    def close(self):
        with self.lock:
            if not self.f.closed:
                self.f.close()
