/* fuzz_rframe: libFuzzer target for the Raft port's framing check
 * (src/raft/rframe.c): every byte a peer sends on the Raft port goes
 * through it before raft_uv reads it.
 *
 * Input: one byte choosing the chunk size (1..32 bytes, or 0: all at once),
 * then the stream. Limits are small (64 KiB messages, 128 KiB snapshots) so
 * that the bounds are reached.
 *
 * Checked, besides "no crash, no leak, no UB":
 *   - rframe_feed returns 0, TLS_E_FRAME or TLS_E_NOMEM;
 *   - the verdict and the count of whole messages do not depend on how the
 *     stream is cut into chunks (whole vs the chosen size);
 *   - an accepted AppendEntries never announces more payload than the bound.
 *
 * Run: ./tests/fuzz/fuzz_rframe -max_total_time=60 WORKDIR
 *      tests/fuzz/corpus/rframe */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "raft/rframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                   \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "fuzz_rframe: %s:%d: check failed: %s\n", \
                    __FILE__, __LINE__, #cond);                       \
            abort();                                                  \
        }                                                             \
    } while (0)

static int run(const uint8_t *p, size_t n, size_t chunk, uint64_t *messages)
{
    struct rframe_limits lim = {64u << 10, 128u << 10};
    struct rframe f;
    char errmsg[ERR_MSG_SIZE];
    int rv = 0;

    rframe_init(&f, &lim);
    for (size_t off = 0; off < n && rv == 0; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;

        rv = rframe_feed(&f, p + off, k, errmsg);
        CHECK(rv == 0 || rv == TLS_E_FRAME || rv == TLS_E_NOMEM);
        if (rv == 0 && f.type == 1 && f.state != 0) {
            CHECK(f.payload <= lim.message_max);
        }
    }
    *messages = f.messages;
    rframe_free(&f);
    return rv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t m1, m2;
    size_t chunk;
    int a, b;

    if (size < 1) {
        return 0;
    }
    chunk = data[0] % 33;
    data++;
    size--;
    a = run(data, size, size > 0 ? size : 1, &m1);
    b = run(data, size, chunk != 0 ? chunk : (size > 0 ? size : 1), &m2);
    CHECK(a == b);
    CHECK(a != 0 || m1 == m2);
    return 0;
}
