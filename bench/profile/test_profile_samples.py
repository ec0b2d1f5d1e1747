#!/usr/bin/env python3
"""Unit tests of bench/profile's sample classification (profile_samples):
perf script and nm parsing, the kernel's lines by system call and target,
the user-space groups, and the scaling to µs per claim. Synthetic input in
the shape perf 6.1 and nm print; no perf needed.

  python3 bench/profile/test_profile_samples.py
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import profile_samples as ps  # noqa: E402

K = "[kernel.kallsyms]"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
ONCED = "/opt/once/build/release/onced"  # any absolute path ending in onced


def kframes(*names):
    return [(n, K) for n in names]


class ParseTest(unittest.TestCase):
    def test_script(self):
        text = ("onced 28958     250000 \n"
                "\tffffffff81bd09dc iowrite16 ([kernel.kallsyms])\n"
                "\tffffffff81d2f4f2 vp_notify+0x12 ([kernel.kallsyms])\n"
                "\t            2b95 [unknown] (/usr/lib/x86_64-linux-gnu/liburing.so.2.3)\n"
                "\n"
                "iou-wrk-28958 28999     500000 \n"
                "\t           299d protobuf_c_message_pack (/usr/lib/libprotobuf-c.so.1.0.0)\n"
                "\n")
        s = ps.parse_script(text.splitlines(True))
        self.assertEqual(len(s), 2)
        self.assertEqual(s[0][:3], ("onced", 28958, 250000))
        self.assertEqual(s[0][3][1], ("vp_notify", K))
        self.assertEqual(s[0][3][2][1], "/usr/lib/x86_64-linux-gnu/liburing.so.2.3")
        self.assertEqual(s[1][:3], ("iou-wrk-28958", 28999, 500000))

    def test_nm(self):
        text = ("000000000003af00 t apply_batch\t/w/build/release/../../src/fsm/fsm.c:380\n"
                "0000000000012225 t apply_batch.cold\t/w/build/release/../../src/fsm/fsm.c:380\n"
                "0000000000011111 T once__log__batch__pack\t/w/build/release/proto/once_log.pb-c.c:9\n"
                "0000000000022222 t one\t/w/src/server/metrics.c:10\n"
                "0000000000033333 t one\t/w/src/http/httpd.c:20\n"
                "0000000000044444 D some_data\t/w/src/fsm/fsm.c:1\n"
                "0000000000055555 t nofile\n")
        m = ps.parse_nm(text)
        self.assertEqual(m["apply_batch"], "src/fsm/fsm.c")
        self.assertEqual(m["once__log__batch__pack"], "proto/once_log.pb-c.c")
        self.assertIsNone(m["one"])  # two static functions of that name
        self.assertNotIn("some_data", m)
        self.assertNotIn("nofile", m)


class KernelTest(unittest.TestCase):
    def group(self, *names, comm="onced"):
        return ps.kernel_group(comm, kframes(*names) + [("__libc_write", LIBC)])

    def test_call_and_target(self):
        self.assertEqual(self.group("tcp_sendmsg_locked", "tcp_sendmsg", "sock_write_iter",
                                    "vfs_write", "ksys_write", "do_syscall_64",
                                    "entry_SYSCALL_64_after_hwframe"),
                         "kernel: write (TCP)")
        # do_writev is inlined into the dispatcher: no __x64_sys_ frame.
        self.assertEqual(self.group("unix_stream_sendmsg", "sock_write_iter",
                                    "do_iter_readv_writev", "vfs_writev", "do_writev",
                                    "do_syscall_64"),
                         "kernel: writev (unix socket)")
        self.assertEqual(self.group("finish_task_switch.isra.0", "schedule",
                                    "__x64_sys_epoll_wait", "x64_sys_call",
                                    "do_syscall_64"),
                         "kernel: epoll_wait")
        self.assertEqual(self.group("iowrite16", "iomap_dio_rw", "ext4_file_write_iter",
                                    "io_write", "io_submit_sqes",
                                    "__do_sys_io_uring_enter", "do_syscall_64"),
                         "kernel: io_uring_enter")
        # A read that never got past the VFS has no target.
        self.assertEqual(self.group("fdget_pos", "ksys_read", "do_syscall_64"),
                         "kernel: read")

    def test_not_calls(self):
        # An interrupt taken in the dispatcher is not a call of that name.
        self.assertEqual(self.group("handle_softirqs", "__irq_exit_rcu",
                                    "sysvec_apic_timer_interrupt",
                                    "asm_sysvec_apic_timer_interrupt", "x64_sys_call",
                                    "do_syscall_64"),
                         "kernel: interrupts, softirq")
        self.assertEqual(self.group("finish_task_switch.isra.0", "__schedule", "schedule",
                                    "exit_to_user_mode_loop", "do_syscall_64",
                                    "entry_SYSCALL_64_after_hwframe"),
                         "kernel: preempted (a task switch on return to user space)")
        self.assertEqual(self.group("finish_task_switch.isra.0", "__schedule", "schedule",
                                    "irqentry_exit_to_user_mode",
                                    "asm_sysvec_reschedule_ipi"),
                         "kernel: preempted (a task switch on return to user space)")
        self.assertEqual(self.group("perf_tp_event", "perf_syscall_enter",
                                    "syscall_trace_enter", "do_syscall_64"),
                         "kernel: perf stat's syscall counting (this tool)")
        self.assertEqual(self.group("clear_page_erms", "handle_mm_fault",
                                    "do_user_addr_fault", "exc_page_fault",
                                    "asm_exc_page_fault"),
                         "kernel: page faults")
        self.assertEqual(self.group("io_handle_tw_list", "tctx_task_work_run",
                                    "task_work_run", "get_signal"),
                         "kernel: io_uring task work")
        self.assertEqual(self.group("io_write", comm="iou-wrk-28958"),
                         "kernel: io_uring workers")
        self.assertEqual(self.group("some_kernel_thing"), "kernel: other")


class UserTest(unittest.TestCase):
    SRC = {"apply_batch": "src/fsm/fsm.c", "place": "src/fsm/table.c",
           "hash_keyed2": "src/common/hash.c", "metrics_answered": "src/server/metrics.c",
           "dispatch": "src/raft/pipeline.c", "conn_parse": "src/rpc/conn.c",
           "service_serve": "src/server/service.c",
           "once__rpc__envelope__pack": "proto/once_rpc.pb-c.c",
           "arena_alloc": "src/common/arena.c", "one": None}

    def group(self, sym, dso):
        return ps.user_group(sym, dso, self.SRC)

    def test_libraries(self):
        self.assertEqual(self.group("_int_malloc", LIBC), ps.G_MEM)
        self.assertEqual(self.group("__memmove_avx512_unaligned_erms", LIBC), ps.G_MEM)
        self.assertEqual(self.group("cfree@GLIBC_2.2.5", LIBC), ps.G_MEM)
        self.assertEqual(self.group("unlink_chunk.constprop.0", LIBC), ps.G_MEM)
        self.assertEqual(self.group("__vfprintf_internal", LIBC), ps.G_LIBC)
        self.assertEqual(self.group("__vdso_clock_gettime", "[vdso]"), ps.G_LIBC)
        self.assertEqual(self.group("[unknown]", "/usr/lib/libprotobuf-c.so.1.0.0"),
                         ps.G_PROTOBUF)
        self.assertEqual(self.group("uv_timer_start", "/usr/lib/libuv.so.1.0.0"), ps.G_UV)
        self.assertEqual(self.group("[unknown]", "/usr/lib/libraft.so.2.0.0"), ps.G_RAFT)
        self.assertEqual(self.group("x", "/usr/lib/liburing.so.2.3"), ps.G_STORE)
        self.assertEqual(self.group("x", "/usr/lib/libcrypto.so.3"), ps.G_TLS)
        self.assertEqual(self.group("x", "/usr/lib/libjansson.so.4"), ps.G_LIBS)

    def test_onced_by_source(self):
        self.assertEqual(self.group("apply_batch", ONCED), ps.G_FSM)
        self.assertEqual(self.group("place.isra.0", ONCED), ps.G_FSM)
        self.assertEqual(self.group("hash_keyed2", ONCED), ps.G_HASH)
        self.assertEqual(self.group("metrics_answered", ONCED), ps.G_METRICS)
        self.assertEqual(self.group("dispatch", ONCED), ps.G_GLUE)
        self.assertEqual(self.group("conn_parse", ONCED), ps.G_RPC)
        self.assertEqual(self.group("service_serve", ONCED), ps.G_SERVER)
        self.assertEqual(self.group("once__rpc__envelope__pack", ONCED), ps.G_PROTOBUF)
        self.assertEqual(self.group("arena_alloc", ONCED), ps.G_ONCE)
        self.assertEqual(self.group("one", ONCED), ps.G_ONCE)  # ambiguous
        self.assertEqual(self.group("not_in_map", ONCED), ps.G_ONCE)


class AttributeTest(unittest.TestCase):
    def test_scaling(self):
        samples = [("onced", 100, 750000, [("apply_batch", ONCED)]),
                   ("onced", 100, 250000, kframes("ksys_write", "do_syscall_64")),
                   ("onced", 101, 1000000, [("_int_malloc", LIBC)])]
        # 0.3 s user + 0.1 s sys over 100,000 claims: 4 µs per claim.
        r = {"utime": 0.3, "stime": 0.1, "claims": 100000.0}
        ps.attribute(r, samples, {"apply_batch": "src/fsm/fsm.c"}, False, 100)
        self.assertAlmostEqual(r["cpu_us"], 4.0)
        self.assertAlmostEqual(sum(r["groups"].values()), 4.0)
        self.assertAlmostEqual(r["groups"][ps.G_FSM], 1.5)
        self.assertAlmostEqual(r["groups"]["kernel: write"], 0.5)
        self.assertAlmostEqual(r["groups"][ps.G_MEM], 2.0)
        self.assertAlmostEqual(r["coverage"], 0.002 / 0.4)
        self.assertAlmostEqual(r["threads"]["main loop (onced)"], 2.0)
        self.assertAlmostEqual(r["threads"]["onced"], 2.0)
        self.assertAlmostEqual(r["funcs"]["apply_batch [onced]"], 1.5)

    def test_user_only(self):
        samples = [("onced", 100, 1000000, [("apply_batch", ONCED)])]
        r = {"utime": 0.3, "stime": 0.1, "claims": 100000.0}
        ps.attribute(r, samples, {"apply_batch": "src/fsm/fsm.c"}, True, 100)
        # User samples scale to utime; the kernel is stime, one line.
        self.assertAlmostEqual(r["groups"][ps.G_FSM], 3.0)
        self.assertAlmostEqual(r["groups"]["kernel (stime, not sampled)"], 1.0)
        self.assertAlmostEqual(r["cpu_us"], 4.0)


if __name__ == "__main__":
    unittest.main()
