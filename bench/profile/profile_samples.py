"""Sample classification for bench/profile/run (a module of that script,
not run alone): reads `perf script` output, names each sample's group
(a library, a subsystem of onced by the source file that defines the
function, or the kernel by system call and target) and adds the samples
up as CPU µs per claim."""

import os
import re
import subprocess

# Groups, in the order the table lists them. Kernel lines ("kernel: ...")
# are added as found, after these.
G_PROTOBUF = "protobuf-c (pack, unpack, generated code)"
G_MEM = "malloc, free, memcpy, memset (libc)"
G_UV = "libuv"
G_RAFT = "libraft"
G_FSM = "state machine (src/fsm)"
G_STORE = "store (src/store, liburing)"
G_RPC = "RPC layer (src/rpc)"
G_GLUE = "raft glue (src/raft)"
G_SERVER = "server (src/server)"
G_HASH = "hashing (SipHash, CRC32C)"
G_METRICS = "metrics (src/server/metrics.c, prom.c)"
G_TLS = "OpenSSL, GnuTLS, src/tls (TLS, EVP hashes)"
G_ONCE = "once, other (src/common, ...)"
G_LIBC = "libc, other (and the vDSO's clock_gettime)"
G_LIBS = "other libraries"
GROUPS = [G_PROTOBUF, G_MEM, G_UV, G_RAFT, G_FSM, G_STORE, G_RPC, G_GLUE,
          G_SERVER, G_HASH, G_METRICS, G_TLS, G_ONCE, G_LIBC, G_LIBS]

# glibc's allocator and mem* functions, also under their versioned
# aliases (cfree@GLIBC_2.2.5).
MEM_FUNCS = re.compile(
    r"^(__libc_)?(malloc|calloc|realloc|free|cfree|_int_malloc|_int_free|"
    r"_int_realloc|malloc_consolidate|tcache_\w+|unlink_chunk|"
    r"__(libc_)?memalign|_mid_memalign|posix_memalign|aligned_alloc|"
    r"sysmalloc|(__)?malloc_usable_size|__?mem(cpy|move|set|cmp)\w*|__memcpy\w*|"
    r"mem(cpy|move|set|cmp)|"
    r"__memmove\w*|__memset\w*|__memcmp\w*|__wmemset\w*)"
    r"(\.\w+)*(@\w+(\.\w+)*)?$")


HEADER = re.compile(r"^(\S.*?)\s+(\d+)\s+(\d+)\s*$")
FRAME = re.compile(r"^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")


def read_samples(data):
    """[(comm, tid, period_ns, [(sym, dso), ...] leaf first)] from perf
    script on the file @data; RuntimeError if perf script fails."""
    p = subprocess.Popen(["perf", "script", "-i", data, "-F",
                          "comm,tid,period,ip,sym,dso", "--no-inline"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, errors="replace")
    out = parse_script(p.stdout)
    if p.wait() != 0:
        raise RuntimeError("perf script failed on %s" % data)
    return out


def parse_script(lines):
    """The samples of `perf script -F comm,tid,period,ip,sym,dso` output:
    a header line per sample, then its call chain one frame a line."""
    out = []
    cur = None
    for line in lines:
        if not line.strip():
            cur = None
            continue
        if not line[0].isspace():
            m = HEADER.match(line)
            if m:
                cur = (m.group(1), int(m.group(2)), int(m.group(3)), [])
                out.append(cur)
            continue
        m = FRAME.match(line)
        if m and cur is not None:
            sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(2))
            cur[3].append((sym, m.group(3)))
    return out


def source_map(binary):
    """{function: source path} for onced's own functions, from nm -l; a
    name defined in two files maps to None (both static, rare)."""
    r = subprocess.run(["nm", "-l", "--defined-only", binary],
                       capture_output=True, text=True)
    return parse_nm(r.stdout)


def parse_nm(text):
    """{function: path from src/ or proto/ on} from `nm -l` output."""
    m = {}
    for line in text.splitlines():
        parts = line.split("\t")
        f = parts[0].split()
        if len(f) != 3 or f[1] not in "tTwW" or len(parts) < 2:
            continue
        path = parts[1].rsplit(":", 1)[0]
        i = path.find("/src/")
        j = path.find("/proto/")
        path = path[i + 1:] if i >= 0 else (path[j + 1:] if j >= 0 else path)
        name = f[2]
        if name in m and m[name] != path:
            m[name] = None
        else:
            m[name] = path
    return m


def dso_base(dso):
    return os.path.basename(dso) if dso.startswith("/") else dso


def is_kernel(dso):
    return dso.startswith("[kernel") or dso.endswith(".ko") or dso.startswith("[guest")


SYSCALL_IMPL = re.compile(r"^(?:__x64_sys_|__ia32_sys_|__do_sys_|__se_sys_|ksys_|"
                          r"__do_|do_)?(\w+)$")
# Functions of the syscall path itself, not of one call.
SYSCALL_PATH = ("syscall_trace_enter", "syscall_exit_work", "exit_to_user_mode_loop",
                "syscall_exit_to_user_mode", "exit_to_user_mode_prepare")
SYSCALL = re.compile(r"^(?:__x64_sys|__ia32_sys|__do_sys|__se_sys|ksys)_(\w+)$")


IO_CALLS = ("read", "write", "readv", "writev", "sendmsg", "recvmsg", "sendto",
            "recvfrom", "pread64", "pwrite64", "preadv", "pwritev")
# What an I/O call went to, from the first kernel function under the call
# that names it (the chain is leaf first, so walk it backwards).
IO_TARGETS = (("unix_", "unix socket"), ("tcp_", "TCP"), ("inet_", "TCP"),
              ("ext4_", "file"), ("iomap_", "file"), ("eventfd", "eventfd"),
              ("pipe_", "pipe"))


def io_target(call, below):
    if call not in IO_CALLS:
        return ""
    for s in reversed(below):
        for prefix, what in IO_TARGETS:
            if s.startswith(prefix):
                return " (%s)" % what
    return ""


def kernel_group(comm, frames):
    if comm.startswith("iou-wrk") or comm.startswith("iou-sqp"):
        return "kernel: io_uring workers"
    names = [s for s, d in frames if is_kernel(d)]
    # The function the syscall dispatcher called is the call itself
    # (__x64_sys_epoll_wait, ksys_write, do_writev, ...: some are inlined
    # into the dispatcher, so no one prefix names them all).
    for i, s in enumerate(names):
        if s in ("x64_sys_call", "do_syscall_64"):
            if i == 0:
                break
            below = names[i - 1]
            m = SYSCALL_IMPL.match(below)
            # An interrupt taken in the dispatcher itself is no call.
            if m and below not in SYSCALL_PATH and below != "x64_sys_call" \
                    and not below.startswith(("asm_", "sysvec_", "irq", "common_interrupt")):
                return "kernel: %s%s" % (m.group(1), io_target(m.group(1), names[:i - 1]))
            break
    for i, s in enumerate(names):
        m = SYSCALL.match(s)
        if m:
            return "kernel: %s%s" % (m.group(1), io_target(m.group(1), names[:i]))
    for s in names:
        if s in ("exc_page_fault", "asm_exc_page_fault", "do_user_addr_fault"):
            return "kernel: page faults"
    for s in names:
        if s.startswith("tctx_task_work") or s.startswith("io_handle_tw"):
            return "kernel: io_uring task work"
    for s in names:
        if s.startswith("perf_syscall") or s.startswith("perf_tp_event"):
            return "kernel: perf stat's syscall counting (this tool)"
    # A task switch on the way back to user space, after an interrupt or
    # a system call: the leader preempted (a busy machine), the switch's
    # own cost.
    if any(s.startswith(("irqentry_exit", "exit_to_user_mode")) for s in names) \
            and any(s in ("schedule", "__schedule") or s.startswith("asm_sysvec_reschedule")
                    for s in names):
        return "kernel: preempted (a task switch on return to user space)"
    for s in names:
        if "softirq" in s or s.startswith("irq_exit") or s.startswith("sysvec_") \
                or s.startswith("common_interrupt"):
            return "kernel: interrupts, softirq"
    for s in names:
        if s.startswith("entry_SYSCALL") or s.startswith("do_syscall") \
                or s.startswith("syscall_") or s.startswith("exit_to_user") \
                or s == "x64_sys_call":
            return "kernel: syscall entry and exit"
    return "kernel: other"


def user_group(sym, dso, srcmap):
    base = dso_base(dso)
    if base.startswith("libprotobuf-c"):
        return G_PROTOBUF
    if base.startswith("libc.so") or base.startswith("ld-linux"):
        return G_MEM if MEM_FUNCS.match(sym) else G_LIBC
    if base == "[vdso]":
        return G_LIBC
    if base.startswith("libuv"):
        return G_UV
    if base.startswith("libraft"):
        return G_RAFT
    if base.startswith("liburing"):
        return G_STORE
    if base.startswith(("libssl", "libcrypto", "libgnutls", "libnettle")):
        return G_TLS
    if base != "onced":
        return G_LIBS
    path = srcmap.get(sym)
    if path is None:
        # gcc's clones (foo.isra.0, foo.part.0, ...) are named after foo.
        path = srcmap.get(re.sub(r"\.(isra|part|constprop|cold|lto_priv)\.\d+.*$",
                                 "", sym))
    if path is None:
        return G_ONCE
    if path.startswith("proto/") or path.endswith(".pb-c.c"):
        return G_PROTOBUF
    if path in ("src/common/hash.c", "src/common/crc32c.c"):
        return G_HASH
    if path in ("src/server/metrics.c", "src/common/prom.c"):
        return G_METRICS
    for prefix, g in (("src/fsm/", G_FSM), ("src/store/", G_STORE),
                      ("src/tls/", G_TLS), ("src/rpc/", G_RPC),
                      ("src/raft/", G_GLUE), ("src/server/", G_SERVER)):
        if path.startswith(prefix):
            return g
    return G_ONCE


def attribute(r, samples, srcmap, user_only, pid):
    """Fill r with µs per claim by group, function and thread."""
    cpu = r["utime"] + (0 if user_only else r["stime"])
    total = sum(p for _, _, p, _ in samples)
    r["nsamples"] = len(samples)
    r["coverage"] = (total / 1e9) / max(r["utime"] + r["stime"], 1e-9) \
        if not user_only else (total / 1e9) / max(r["utime"], 1e-9)
    r["cpu_us"] = 1e6 * (r["utime"] + r["stime"]) / max(r["claims"], 1)
    # Each sample stands for (its period / all periods) of the CPU time.
    scale = 1e6 * cpu / max(r["claims"], 1) / max(total, 1)
    groups, funcs, threads = {}, {}, {}
    for comm, tid, period, frames in samples:
        w = period * scale
        sym, dso = frames[0] if frames else ("[unknown]", "[unknown]")
        if is_kernel(dso):
            g = kernel_group(comm, frames)
        else:
            g = user_group(sym, dso, srcmap)
        groups[g] = groups.get(g, 0) + w
        key = "%s [%s]" % (sym, dso_base(dso))
        funcs[key] = funcs.get(key, 0) + w
        # The main thread runs the loop; the others are libuv's pool, the
        # snapshot encoder, io_uring's workers.
        t = "main loop (%s)" % comm if tid == pid else re.sub(r"\d+$", "N", comm)
        threads[t] = threads.get(t, 0) + w
    if user_only:
        groups["kernel (stime, not sampled)"] = 1e6 * r["stime"] / max(r["claims"], 1)
    r["groups"], r["funcs"], r["threads"] = groups, funcs, threads
