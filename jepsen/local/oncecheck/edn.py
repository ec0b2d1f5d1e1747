"""A reader and writer for the subset of EDN that Jepsen histories use.

Read: maps, vectors, lists, sets, keywords, symbols, strings, characters,
integers (with an optional N), floats (with an optional M), ratios (as
floats), nil, true, false, ##Inf/##-Inf/##NaN, comments (;), discards (#_)
and tagged literals (#inst "...", #jepsen.history.Op{...}): a tagged value
is returned as the value itself (the tag is kept on a Tagged wrapper only for
non-collection values), which is what a checker needs.

Python types: dict (map), list (vector), tuple (list), frozenset (set),
Keyword, Symbol, str, int, float, bool, None. Collections that must be
hashable (map keys, set members) are frozen (list -> tuple, dict -> FrozenMap).
"""

import math

__all__ = ["Keyword", "K", "Symbol", "Tagged", "FrozenMap", "EDNError",
           "loads_all", "dumps"]


class Keyword:
    """An EDN keyword such as :ok or :jepsen/op (name without the colon)."""
    __slots__ = ("name",)
    _interned = {}

    def __new__(cls, name):
        k = cls._interned.get(name)
        if k is None:
            k = object.__new__(cls)
            k.name = name
            cls._interned[name] = k
        return k

    def __repr__(self):
        return ":" + self.name

    def __eq__(self, other):
        return isinstance(other, Keyword) and other.name == self.name

    def __hash__(self):
        return hash(("kw", self.name))

    def __lt__(self, other):
        return str(self) < str(other)

    __str__ = __repr__


def K(name):
    return Keyword(name)


class Symbol:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, Symbol) and other.name == self.name

    def __hash__(self):
        return hash(("sym", self.name))


class Tagged:
    """A tagged scalar, e.g. #inst "2026-01-01T00:00:00Z"."""
    __slots__ = ("tag", "value")

    def __init__(self, tag, value):
        self.tag, self.value = tag, value

    def __repr__(self):
        return "#%s %s" % (self.tag, dumps(self.value))

    def __eq__(self, other):
        return (isinstance(other, Tagged) and other.tag == self.tag
                and other.value == self.value)

    def __hash__(self):
        return hash(("tag", self.tag, _freeze(self.value)))


class FrozenMap(tuple):
    """A hashable map (a map used as a map key or set member)."""

    def as_dict(self):
        return dict(self)


class EDNError(ValueError):
    def __init__(self, msg, line, col=None):
        self.msg, self.line, self.col = msg, line, col
        where = "line %d" % line + (", column %d" % col if col else "")
        super().__init__("%s: %s" % (where, msg))


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return FrozenMap(sorted(((_freeze(k), _freeze(x)) for k, x in v.items()),
                                key=repr))
    if isinstance(v, set):
        return frozenset(_freeze(x) for x in v)
    return v


_DELIMS = set('()[]{}";,') | set(" \t\r\n\f\v")
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r",
          "backspace": "\b", "formfeed": "\f"}
_ESC = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "b": "\b",
        "f": "\f", "/": "/"}


class _Reader:
    def __init__(self, text):
        self.s = text
        self.i = 0
        self.n = len(text)
        self.line = 1
        self.line_start = 0

    def err(self, msg, at=None):
        at = self.i if at is None else at
        line = self.s.count("\n", 0, at) + 1
        col = at - (self.s.rfind("\n", 0, at) + 1) + 1
        raise EDNError(msg, line, col)

    def line_at(self, at):
        return self.s.count("\n", 0, at) + 1

    def skip_ws(self):
        s, n = self.s, self.n
        while self.i < n:
            c = s[self.i]
            if c in " \t\r\n\f\v,":
                self.i += 1
            elif c == ";":
                j = s.find("\n", self.i)
                self.i = n if j < 0 else j + 1
            elif c == "#" and self.i + 1 < n and s[self.i + 1] == "_":
                self.i += 2
                self.read()          # discarded form
            else:
                break

    def token(self):
        j = self.i
        s, n = self.s, self.n
        while j < n and s[j] not in _DELIMS:
            j += 1
        tok = s[self.i:j]
        self.i = j
        return tok

    def read(self):
        self.skip_ws()
        if self.i >= self.n:
            self.err("unexpected end of input")
        s = self.s
        c = s[self.i]
        start = self.i
        if c == "{":
            self.i += 1
            items = self.read_seq("}", start)
            if len(items) % 2:
                self.err("map literal with an odd number of forms", start)
            d = {}
            for k, v in zip(items[0::2], items[1::2]):
                d[_freeze(k)] = v
            return d
        if c == "[":
            self.i += 1
            return self.read_seq("]", start)
        if c == "(":
            self.i += 1
            return tuple(self.read_seq(")", start))
        if c in ")]}":
            self.err("unmatched %r" % c)
        if c == '"':
            return self.read_string()
        if c == "\\":
            self.i += 1
            tok = s[self.i] if self.i < self.n else ""
            self.i += 1
            rest = self.token()
            tok += rest
            if tok in _CHARS:
                return _CHARS[tok]
            if len(tok) == 5 and tok[0] == "u":
                try:
                    return chr(int(tok[1:], 16))
                except ValueError:
                    pass
            if len(tok) == 1:
                return tok
            self.err("bad character literal \\%s" % tok, start)
        if c == "#":
            self.i += 1
            if self.i >= self.n:
                self.err("unexpected end of input after #")
            d = s[self.i]
            if d == "{":
                self.i += 1
                return frozenset(_freeze(x) for x in self.read_seq("}", start))
            if d == "#":
                self.i += 1
                tok = self.token()
                vals = {"Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}
                if tok not in vals:
                    self.err("unknown symbolic value ##%s" % tok, start)
                return vals[tok]
            if d.isalpha():
                tag = self.token()
                v = self.read()
                if isinstance(v, (dict, list, tuple, frozenset)):
                    return v        # records (#jepsen.history.Op{...}) etc.
                return Tagged(tag, v)
            self.err("unsupported dispatch #%s" % d, start)
        if c == ":":
            self.i += 1
            tok = self.token()
            if not tok or tok.startswith(":") and len(tok) == 1:
                self.err("empty keyword", start)
            return Keyword(tok)
        tok = self.token()
        if not tok:
            self.err("unexpected character %r" % c)
        return self.atom(tok, start)

    def atom(self, tok, start):
        if tok == "nil":
            return None
        if tok == "true":
            return True
        if tok == "false":
            return False
        c0 = tok[0]
        if c0.isdigit() or (c0 in "+-" and len(tok) > 1 and tok[1].isdigit()):
            t = tok
            try:
                if t.endswith("N"):
                    return int(t[:-1])
                if t.endswith("M"):
                    return float(t[:-1])
                if "/" in t:
                    a, b = t.split("/")
                    return int(a) / int(b)
                if any(ch in t for ch in ".eE") and not t.lower().startswith(("0x", "-0x", "+0x")):
                    return float(t)
                if t.lower().lstrip("+-").startswith("0x"):
                    return int(t, 16)
                return int(t)
            except (ValueError, ZeroDivisionError):
                self.err("bad number %r" % tok, start)
        return Symbol(tok)

    def read_string(self):
        start = self.i
        self.i += 1
        out = []
        s, n = self.s, self.n
        while True:
            j = self.i
            while j < n and s[j] not in '"\\':
                j += 1
            out.append(s[self.i:j])
            if j >= n:
                self.err("unterminated string", start)
            if s[j] == '"':
                self.i = j + 1
                return "".join(out)
            # backslash
            if j + 1 >= n:
                self.err("unterminated string", start)
            e = s[j + 1]
            if e in _ESC:
                out.append(_ESC[e])
                self.i = j + 2
            elif e == "u":
                hx = s[j + 2:j + 6]
                try:
                    out.append(chr(int(hx, 16)))
                except ValueError:
                    self.err("bad \\u escape in string", j)
                self.i = j + 6
            else:
                self.err("bad escape \\%s in string" % e, j)

    def read_seq(self, close, start):
        items = []
        while True:
            self.skip_ws()
            if self.i >= self.n:
                self.err("unclosed %s (opened here)" % {"}": "{", "]": "[", ")": "("}[close], start)
            if self.s[self.i] == close:
                self.i += 1
                return items
            if self.s[self.i] in ")]}":
                self.err("mismatched %r (expected %r)" % (self.s[self.i], close))
            items.append(self.read())


def loads_all(text):
    """All top-level forms of TEXT as a list of (form, line)."""
    r = _Reader(text)
    out = []
    line, counted = 1, 0          # lines counted incrementally: linear time
    while True:
        r.skip_ws()
        if r.i >= r.n:
            return out
        at = r.i
        line += text.count("\n", counted, at)
        counted = at
        out.append((r.read(), line))


def _dump_str(s):
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps(v):
    """V as one line of EDN."""
    if v is None:
        return "nil"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (Keyword, Symbol, Tagged)):
        return repr(v)
    if isinstance(v, str):
        return _dump_str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "##NaN"
        if math.isinf(v):
            return "##Inf" if v > 0 else "##-Inf"
        return repr(v)
    if isinstance(v, FrozenMap):
        return dumps(dict(v))
    if isinstance(v, dict):
        return "{" + ", ".join(dumps(k) + " " + dumps(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + " ".join(dumps(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + " ".join(dumps(x) for x in v) + ")"
    if isinstance(v, (set, frozenset)):
        return "#{" + " ".join(sorted((dumps(x) for x in v))) + "}"
    raise TypeError("cannot write %r as EDN" % (v,))
