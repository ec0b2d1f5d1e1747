/* raft/rframe: raft_uv's message framing, checked as it streams by. */
#include <check.h>
#include <string.h>

#include <raft.h>

#include "raft/rframe.h"

Suite *rframe_suite(void);

#define LIM_MSG  (1u << 20)
#define LIM_SNAP (4u << 20)

struct buf
{
    uint8_t b[4096];
    size_t n;
};

static void put64(struct buf *w, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        w->b[w->n++] = (uint8_t)(v >> (8 * i));
    }
}

static void put(struct buf *w, const void *p, size_t n)
{
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

/* An AppendEntries of @n entries of @len bytes each (types @type), with
 * raft's 8 unused header bytes, and the payload. */
static void append_entries(struct buf *w,
                           unsigned n,
                           uint32_t len,
                           uint8_t type)
{
    put64(w, RAFT_IO_APPEND_ENTRIES);
    put64(w, 48 + 16 * (uint64_t)n);
    put64(w, 3); /* term, prev index, prev term, commit */
    put64(w, 7);
    put64(w, 2);
    put64(w, 6);
    put64(w, n);
    for (unsigned i = 0; i < n; i++) {
        uint8_t t[4] = {type, 0, 0, 0};

        put64(w, 3);
        put(w, t, 4);
        put(w, &len, 4); /* little-endian host */
    }
    put64(w, 0); /* unused */
    for (unsigned i = 0; i < n; i++) {
        for (uint32_t k = 0; k < len; k++) {
            w->b[w->n++] = 0xAB;
        }
    }
}

/* An InstallSnapshot with a configuration @conf (@conf_len bytes) and a
 * data length @data (the data itself not written). */
static void install_snapshot(struct buf *w,
                             const void *conf,
                             size_t conf_len,
                             uint64_t data)
{
    put64(w, RAFT_IO_INSTALL_SNAPSHOT);
    put64(w, 40 + conf_len + 8 + 8);
    put64(w, 4);
    put64(w, 100);
    put64(w, 3);
    put64(w, 90);
    put64(w, conf_len);
    put(w, conf, conf_len);
    put64(w, data);
    put64(w, 0); /* unused */
}

static void request_vote(struct buf *w, uint64_t hlen)
{
    put64(w, RAFT_IO_REQUEST_VOTE);
    put64(w, hlen);
    for (uint64_t i = 0; i < hlen; i++) {
        w->b[w->n++] = 1;
    }
}

/* Feed @w whole, and byte by byte: the verdicts must agree. */
static int check(const struct buf *w, uint64_t *messages)
{
    struct rframe_limits lim = {LIM_MSG, LIM_SNAP};
    struct rframe a, b;
    char errmsg[ERR_MSG_SIZE];
    int whole, bytes = 0;

    rframe_init(&a, &lim);
    rframe_init(&b, &lim);
    whole = rframe_feed(&a, w->b, w->n, errmsg);
    for (size_t i = 0; i < w->n && bytes == 0; i++) {
        bytes = rframe_feed(&b, w->b + i, 1, errmsg);
    }
    ck_assert_int_eq(whole, bytes);
    if (whole == 0) {
        ck_assert_uint_eq(a.messages, b.messages);
    }
    if (messages != NULL) {
        *messages = a.messages;
    }
    rframe_free(&a);
    rframe_free(&b);
    return whole;
}

static const uint8_t conf_one[] = {
    1,                            /* format */
    1,   0,   0,   0, 0, 0, 0, 0, /* one server */
    9,   0,   0,   0, 0, 0, 0, 0, /* id */
    '1', ':', '2', 0,             /* address */
    1,                            /* role */
};

START_TEST(valid_messages_pass_whole_and_byte_by_byte)
{
    struct buf w = {.n = 0};
    uint64_t m = 0;

    append_entries(&w, 2, 16, RAFT_COMMAND);
    request_vote(&w, 32);
    request_vote(&w, 40);
    install_snapshot(&w, conf_one, sizeof conf_one, 0);
    append_entries(&w, 0, 0, RAFT_COMMAND); /* a heartbeat */
    ck_assert_int_eq(check(&w, &m), 0);
    ck_assert_uint_eq(m, 5);
}
END_TEST

START_TEST(header_lengths_out_of_range_are_refused)
{
    static const uint64_t bad[][2] = {
        {RAFT_IO_APPEND_ENTRIES, 1ull << 62},
        {RAFT_IO_APPEND_ENTRIES, 39},
        {RAFT_IO_REQUEST_VOTE, 8},
        {RAFT_IO_REQUEST_VOTE, 33}, /* raft would read a flags word past it */
        {RAFT_IO_REQUEST_VOTE_RESULT, 20},
        {RAFT_IO_APPEND_ENTRIES_RESULT, 65},
        {RAFT_IO_TIMEOUT_NOW, 0},
        {RAFT_IO_INSTALL_SNAPSHOT, RFRAME_SNAPSHOT_HEADER_MAX + 1},
        {0, 32},
        {99, 32},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct buf w = {.n = 0};

        put64(&w, bad[i][0]);
        put64(&w, bad[i][1]);
        ck_assert_int_eq(check(&w, NULL), TLS_E_FRAME);
    }
}
END_TEST

START_TEST(append_entries_rules)
{
    struct buf w = {.n = 0};

    append_entries(&w, 1, 12, RAFT_COMMAND); /* not a multiple of 8 */
    ck_assert_int_eq(check(&w, NULL), TLS_E_FRAME);
    w.n = 0;
    append_entries(&w, 1, 8, 7); /* no such entry type */
    ck_assert_int_eq(check(&w, NULL), TLS_E_FRAME);
    w.n = 0;
    put64(&w, RAFT_IO_APPEND_ENTRIES);
    put64(&w, 56); /* room for one entry */
    put64(&w, 1);
    put64(&w, 0);
    put64(&w, 0);
    put64(&w, 0);
    put64(&w, 2); /* but two announced */
    ck_assert_int_eq(check(&w, NULL), TLS_E_FRAME);
    w.n = 0;
    put64(&w, RAFT_IO_APPEND_ENTRIES);
    put64(&w, 56);
    put64(&w, 1);
    put64(&w, 0);
    put64(&w, 0);
    put64(&w, 0);
    put64(&w, 1);
    put64(&w, 1);
    {
        uint8_t t[4] = {RAFT_COMMAND, 0, 0, 0};
        uint32_t len = LIM_MSG; /* with the header: over the bound */

        put(&w, t, 4);
        put(&w, &len, 4);
    }
    ck_assert_int_eq(check(&w, NULL), TLS_E_FRAME);
}
END_TEST

START_TEST(install_snapshot_rules)
{
    static const uint8_t past_end[] = {1, 5, 0, 0, 0, 0, 0, 0, 0, 9, 9};
    static const uint8_t no_nul[] = {1, 1, 0, 0, 0, 0, 0, 0,   0,  9,
                                     0, 0, 0, 0, 0, 0, 0, 'a', 'b'};
    static const uint8_t bad_format[] = {2, 0, 0, 0, 0, 0, 0, 0, 0};
    struct buf w = {.n = 0};

    install_snapshot(&w, conf_one, sizeof conf_one, LIM_SNAP);
    ck_assert_int_eq(check(&w, NULL), 0); /* its data still to come */
    w.n = 0;
    install_snapshot(&w, conf_one, sizeof conf_one, LIM_SNAP + 1ull);
    ck_assert_int_eq(check(&w, NULL), TLS_E_FRAME);
    w.n = 0;
    install_snapshot(&w, past_end, sizeof past_end, 8);
    ck_assert_int_eq(check(&w, NULL), TLS_E_FRAME);
    w.n = 0;
    install_snapshot(&w, no_nul, sizeof no_nul, 8);
    ck_assert_int_eq(check(&w, NULL), TLS_E_FRAME);
    w.n = 0;
    install_snapshot(&w, bad_format, sizeof bad_format, 8);
    ck_assert_int_eq(check(&w, NULL), TLS_E_FRAME);
}
END_TEST

/* The payload is counted: the bytes after it are the next preamble. */
START_TEST(payload_is_skipped_exactly)
{
    struct buf w = {.n = 0};
    uint64_t m = 0;

    append_entries(&w, 3, 24, RAFT_BARRIER);
    put64(&w, RAFT_IO_TIMEOUT_NOW);
    put64(&w, 24);
    put64(&w, 1);
    put64(&w, 2);
    put64(&w, 3);
    ck_assert_int_eq(check(&w, &m), 0);
    ck_assert_uint_eq(m, 2);
    /* One payload byte short: the TimeoutNow preamble is read as payload
     * and what follows as a preamble of type 24: refused. */
    w.n = 0;
    append_entries(&w, 1, 16, RAFT_COMMAND);
    w.n -= 1;
    put64(&w, RAFT_IO_TIMEOUT_NOW);
    put64(&w, 24);
    put64(&w, 24);
    put64(&w, 24);
    ck_assert_int_eq(check(&w, NULL), TLS_E_FRAME);
}
END_TEST

Suite *rframe_suite(void)
{
    Suite *s = suite_create("rframe");
    TCase *tc = tcase_create("rframe");

    tcase_add_test(tc, valid_messages_pass_whole_and_byte_by_byte);
    tcase_add_test(tc, header_lengths_out_of_range_are_refused);
    tcase_add_test(tc, append_entries_rules);
    tcase_add_test(tc, install_snapshot_rules);
    tcase_add_test(tc, payload_is_skipped_exactly);
    suite_add_tcase(s, tc);
    return s;
}
