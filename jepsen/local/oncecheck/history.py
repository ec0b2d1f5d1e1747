"""The history model: ops read from EDN, invocations paired with completions.

History format (jepsen/README.md "History format" is the reference):
one op map per line (Jepsen's history.edn), or one vector of op maps.

  {:index 0, :time 1523000, :type :invoke, :process 3, :f :claim,
   :value {:scope "s" :key "k" :request-id "85900f30..." :node "127.0.1.2:7101"
           :kind "NONCE"}}
  {:index 1, :time 9876000, :type :ok, :process 3, :f :claim,
   :value {:scope "s" :key "k" :request-id "85900f30..." :node "127.0.1.2:7101"
           :outcome "ACCEPTED" :retry false :first-request-id "85900f30..."
           :first-index 14 :first-time-ms 1796118283199}}

Client ops have an integer :process and :f :claim, :complete or :release.
:type :invoke is followed, on the same process, by exactly one of :ok (the
cluster answered with an outcome), :fail (an error with applied "false":
certainly not applied) or :info (applied "unknown", a timeout, a lost reply:
maybe applied). An invocation left open at the end counts as :info. Every op
with a non-integer :process (:nemesis, :status, :checker ...) is an *event*:
not paired, used by R7-R10.

Value keys may be written with '-' or '_' (the runner copies oncectl's JSON
field names, e.g. :first_request_id, or uses :first-request-id); keywords or
strings are accepted for outcomes. A value of the form [k v] (jepsen.independent)
is read as v with k = [scope key] (or k = key, scope "").
"""

import math

from .edn import Keyword, Symbol, EDNError, loads_all, dumps, FrozenMap

INF = math.inf

CLIENT_FS = ("claim", "complete", "release")


class HistoryError(ValueError):
    """The history cannot be read: names the line."""

    def __init__(self, msg, line=None):
        self.line = line
        super().__init__(("line %d: " % line if line else "") + msg)


def kname(v):
    """The name of a keyword/symbol, the string itself, else None."""
    if isinstance(v, (Keyword, Symbol)):
        return v.name
    if isinstance(v, str):
        return v
    return None


def norm_value(v):
    """A dict with plain-string keys ('-' form) from an EDN value."""
    if isinstance(v, FrozenMap):
        v = dict(v)
    if not isinstance(v, dict):
        return None
    out = {}
    for k, x in v.items():
        name = kname(k)
        if name is None:
            continue
        out[name.replace("_", "-")] = x
    return out


class Op:
    """One line of the history."""
    __slots__ = ("index", "type", "process", "f", "time", "value", "raw",
                 "line", "pos")

    def __init__(self, raw, line, pos):
        self.raw, self.line, self.pos = raw, line, pos
        m = {kname(k): x for k, x in raw.items() if kname(k) is not None}
        self.type = kname(m.get("type"))
        if self.type not in ("invoke", "ok", "fail", "info"):
            raise HistoryError("op has no valid :type (%s)" %
                               dumps(m.get("type")), line)
        p = m.get("process")
        self.process = p if isinstance(p, int) and not isinstance(p, bool) else kname(p)
        if self.process is None and p is not None:
            self.process = dumps(p)
        self.f = kname(m.get("f"))
        self.time = m.get("time")
        idx = m.get("index")
        self.index = idx if isinstance(idx, int) and not isinstance(idx, bool) else None
        self.value = m.get("value")

    @property
    def is_client(self):
        return isinstance(self.process, int)

    def show(self):
        return "line %d: %s" % (self.line, dumps(self.raw))


def read_ops(text):
    """Ops of an EDN history text, in real-time order. Raises HistoryError."""
    try:
        forms = loads_all(text)
    except EDNError as e:
        raise HistoryError("unreadable EDN: " + e.msg, e.line) from None
    if len(forms) == 1 and isinstance(forms[0][0], (list, tuple)):
        vec, line = forms[0]
        # a vector of maps: lines of the elements are unknown; use the vector's
        forms = [(x, line) for x in vec]
    ops = []
    for pos, (form, line) in enumerate(forms):
        if isinstance(form, FrozenMap):
            form = dict(form)
        if not isinstance(form, dict):
            raise HistoryError("expected an op map, got %s" % dumps(form)[:80], line)
        ops.append(Op(form, line, pos))
    if any(o.index is not None for o in ops):
        if not all(o.index is not None for o in ops):
            bad = next(o for o in ops if o.index is None)
            raise HistoryError("op without :index in a history that has them", bad.line)
        seen = {}
        for o in ops:
            if o.index in seen:
                raise HistoryError("duplicate :index %d (also line %d)" %
                                   (o.index, seen[o.index]), o.line)
            seen[o.index] = o.line
        ops.sort(key=lambda o: o.index)
    for i, o in enumerate(ops):
        o.pos = i          # real-time position: index order, else file order
    return ops


def read_file(path):
    try:
        with open(path, "r", encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError as e:
        raise HistoryError("not UTF-8 text (byte %d)" % e.start) from None
    except OSError as e:
        raise HistoryError("cannot read %s: %s" % (path, e.strerror)) from None
    return read_ops(text)


def _s(v):
    """A string field (strings, keywords, numbers) or None."""
    if v is None:
        return None
    if isinstance(v, (Keyword, Symbol)):
        return v.name
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    return dumps(v)


def _int(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            return None
    return None


def _bool(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return {"true": True, "false": False}.get(v.lower())
    return None


class Call:
    """One client call: an invocation and its completion.

    inv and ret are positions in real-time order (ret = INF when :info).
    type is 'ok', 'fail' or 'info'. Fields come from the invocation value,
    overridden by the completion value.
    """

    def __init__(self, inv_op, ret_op):
        self.inv_op, self.ret_op = inv_op, ret_op
        self.f = inv_op.f
        self.process = inv_op.process
        self.inv = inv_op.pos
        self.type = ret_op.type if ret_op is not None else "info"
        self.ret = ret_op.pos if ret_op is not None and self.type != "info" else INF
        v = {}
        for op in (inv_op, ret_op):
            if op is None:
                continue
            val = op.value
            ik = None
            if isinstance(val, (list, tuple)) and len(val) == 2:
                ik, val = val
            nv = norm_value(val)
            if nv is None:
                if val is not None:
                    raise HistoryError("client op :value is not a map", op.line)
                nv = {}
            if ik is not None:
                if isinstance(ik, (list, tuple)) and len(ik) == 2:
                    nv.setdefault("scope", ik[0])
                    nv.setdefault("key", ik[1])
                else:
                    nv.setdefault("key", ik)
            v.update(nv)
        self.v = v
        self.scope = _s(v.get("scope")) or ""
        self.key = _s(v.get("key"))
        self.rid = _s(v.get("request-id"))
        self.node = _s(v.get("node"))
        out = _s(v.get("outcome"))
        self.outcome = out.upper() if out else None
        self.retry = bool(_bool(v.get("retry")))
        self.first_rid = _s(v.get("first-request-id"))
        self.first_index = _int(v.get("first-index"))
        self.first_time = _int(v.get("first-time-ms"))
        self.token = _s(v.get("owner-token"))
        self.attempt = _int(v.get("owner-attempt"))
        # complete: the result sent is :result-b64 on the invocation; what the
        # cluster returned (the stored result) is :result-b64 on the completion
        self.arg_result = None
        self.res_result = None
        if inv_op is not None:
            iv = norm_value(inv_op.value if not isinstance(inv_op.value, (list, tuple))
                            else inv_op.value[1]) or {}
            self.arg_result = _s(iv.get("result-b64"))
            if self.arg_result is None and self.f == "complete":
                self.arg_result = ""      # default: empty result
            self.terminal = bool(_bool(iv.get("terminal")))
        if ret_op is not None:
            rv = norm_value(ret_op.value if not isinstance(ret_op.value, (list, tuple))
                            else ret_op.value[1]) or {}
            self.res_result = _s(rv.get("result-b64"))
        self.stored_error = _s(v.get("stored-error"))
        kind = _s(v.get("kind"))
        if kind is None and _bool(v.get("idempotent")):
            kind = "IDEMPOTENT"
        self.kind = kind.upper() if kind else None
        self.final = bool(_bool(v.get("final")))
        # a windowed claim (signed timestamp): its record may be pruned
        # legitimately, so a later STALE is a definite answer (R7)
        self.windowed = (v.get("ts") is not None or v.get("window") is not None
                         or v.get("window-ms") is not None)
        self.error = _s(v.get("error"))
        self.applied = _s(v.get("applied"))
        self.id = None

    @property
    def kkey(self):
        return (self.scope, self.key)

    def label(self):
        return "%s %s" % (self.f, self.rid or "-")

    def show(self, indent="    "):
        lines = [indent + self.inv_op.show()]
        if self.ret_op is not None:
            lines.append(indent + self.ret_op.show())
        else:
            lines.append(indent + "(no completion: counted as :info)")
        return "\n".join(lines)


def pair(ops):
    """(calls, events): client calls and the non-client events. Raises
    HistoryError for a completion without an invocation or a second
    invocation on a busy process."""
    open_ = {}
    calls = []
    events = []
    for o in ops:
        if not o.is_client:
            events.append(o)
            continue
        if o.type == "invoke":
            if o.process in open_:
                prev = open_[o.process]
                raise HistoryError("process %s invoked again while its op of line %d "
                                   "is still open" % (o.process, prev.line), o.line)
            open_[o.process] = o
            continue
        inv = open_.pop(o.process, None)
        if inv is None:
            raise HistoryError("completion (:%s) on process %s without an invocation" %
                               (o.type, o.process), o.line)
        if inv.f != o.f and o.f is not None:
            raise HistoryError("completion :f %s does not match invocation :f %s (line %d)"
                               % (o.f, inv.f, inv.line), o.line)
        calls.append(Call(inv, o))
    for inv in open_.values():
        calls.append(Call(inv, None))
    calls.sort(key=lambda c: c.inv)
    for i, c in enumerate(calls):
        c.id = i
        if c.f in CLIENT_FS and c.key is None:
            raise HistoryError("%s op without :key" % c.f, c.inv_op.line)
    return calls, events
