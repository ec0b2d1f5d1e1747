"""The region drill's pure parts (oncelocal/regions.py, netdelay.py): the
placement and its delays, the window and percentile arithmetic, and the
netlink messages of the user-space delayer."""
import socket
import struct
import unittest

import tests.util  # noqa: F401 -- puts jepsen/local on sys.path
from oncelocal import netdelay, regions


class Placement(unittest.TestCase):
    def test_two_two_one_and_the_clients_in_a(self):
        self.assertEqual([len(h) for _, h in regions.REGIONS], [2, 2, 1])
        hosts = [h for _, hs in regions.REGIONS for h in hs]
        self.assertEqual(sorted(hosts), [1, 2, 3, 4, 5])
        self.assertEqual(regions.region_of_host(regions.CLIENT_HOST), "A")
        self.assertNotIn(regions.CLIENT_HOST, range(1, 10))   # no node slot

    def test_every_ordered_pair_has_its_region_delay(self):
        pairs = regions.delay_pairs()
        self.assertEqual(len(pairs), 6 * 5)
        for (src, dst), d in pairs.items():
            self.assertEqual(pairs[(dst, src)], d)          # symmetric
            ra = regions.region_of_host(int(src.rsplit(".", 1)[1]))
            rb = regions.region_of_host(int(dst.rsplit(".", 1)[1]))
            if ra == rb:
                self.assertLessEqual(2 * d, 0.005)          # a few ms inside
            else:
                self.assertTrue(0.020 <= 2 * d <= 0.040, (src, dst, d))
        self.assertEqual(pairs[("127.0.1.1", "127.0.1.5")], 0.015)
        self.assertEqual(pairs[("127.0.1.3", "127.0.1.5")], 0.020)
        self.assertEqual(pairs[("127.0.1.10", "127.0.1.3")], 0.010)

    def test_every_region_loss_leaves_a_majority(self):
        for name, hosts in regions.REGIONS:
            self.assertGreater(5 - len(hosts), 5 // 2, name)

    def test_plan_crashes_and_isolates_every_region(self):
        done = {(r, k) for _, r, k, _ in regions.PLAN if k}
        self.assertEqual(done, {(r, k) for r, _ in regions.REGIONS
                                for k in ("crash", "isolate")})


class Arithmetic(unittest.TestCase):
    def test_longest_gap_includes_the_edges(self):
        self.assertEqual(regions.longest_gap([], 10, 50), (40, 10, 50))
        self.assertEqual(regions.longest_gap([12, 14, 40], 10, 50), (26, 14, 40))
        # points outside the span do not shorten it
        self.assertEqual(regions.longest_gap([5, 30, 60], 10, 50), (20, 10, 30))
        self.assertEqual(regions.longest_gap([1, 2, 3], 10, 13), (3, 10, 13))

    def test_percentile_nearest_rank(self):
        self.assertIsNone(regions.percentile([], 50))
        self.assertEqual(regions.percentile([3, 1, 2], 50), 2)
        self.assertEqual(regions.percentile(list(range(1, 101)), 50), 50)
        self.assertEqual(regions.percentile(list(range(1, 101)), 99), 99)
        self.assertEqual(regions.percentile([7], 99), 7)


def packet_msg(queue, pid, extra=b""):
    """An NFQNL_MSG_PACKET as the kernel sends it: a mark attribute, then
    the packet header attribute."""
    attrs = netdelay._attr(6, struct.pack("!I", 7)) + extra + netdelay._attr(
        netdelay.NFQA_PACKET_HDR, struct.pack("!IHB", pid, 0x0800, 3))
    body = struct.pack("=BBH", socket.AF_INET, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (3 << 8) | 0, 0, 0, 0) + body


class Netlink(unittest.TestCase):
    def test_packet_ids_of_several_messages(self):
        data = packet_msg(100, 5) + packet_msg(100, 6, b"\x05\x00\x09\x00x\0\0\0") + \
            packet_msg(100, 0xfffffffe)
        self.assertEqual(netdelay.packet_ids(data), [5, 6, 0xfffffffe])

    def test_packet_ids_ignore_other_and_truncated_messages(self):
        err = struct.pack("=IHHII", 36, netdelay.NLMSG_ERROR, 0, 0, 0) + b"\0" * 20
        whole = packet_msg(100, 9)
        self.assertEqual(netdelay.packet_ids(err + whole), [9])
        self.assertEqual(netdelay.packet_ids(whole[:-4]), [])
        self.assertEqual(netdelay.packet_ids(b"\x01\x00"), [])

    def test_batch_verdict_message(self):
        m = netdelay._msg(netdelay.NFQNL_MSG_VERDICT_BATCH, 101,
                          netdelay._attr(netdelay.NFQA_VERDICT_HDR,
                                         struct.pack("!II", netdelay.NF_ACCEPT, 42)))
        ln, typ, flags = struct.unpack_from("=IHH", m, 0)
        self.assertEqual((ln, typ, flags), (len(m), (3 << 8) | 3, 1))
        self.assertEqual(struct.unpack_from("!H", m, 18)[0], 101)    # res_id
        self.assertEqual(struct.unpack_from("=HH", m, 20), (12, 2))
        self.assertEqual(struct.unpack_from("!II", m, 24), (1, 42))

    def test_attributes_are_padded(self):
        self.assertEqual(len(netdelay._attr(2, b"12345")), 12)
        self.assertEqual(len(netdelay._attr(2, b"1234")), 8)


if __name__ == "__main__":
    unittest.main()
