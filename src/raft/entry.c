#include "raft/entry.h"

#include <string.h>

#include "common/assert.h"
#include "common/le.h"

uint8_t *entry_alloc(size_t batch_len, struct raft_buffer *out)
{
    size_t len;
    uint8_t *p;

    if (batch_len > (1u << 20)) {
        return NULL;
    }
    len = entry_size(batch_len);
    ONCE_ASSERTF(len % 8 == 0 && len <= ENTRY_MAX,
                 "entry of %zu bytes: B8 needs a multiple of 8", len);
    p = raft_malloc(len);
    if (p == NULL) {
        return NULL;
    }
    le_put32(p, ENTRY_MAGIC);
    le_put32(p + 4, (uint32_t)batch_len);
    memset(p + ENTRY_HDR_SIZE + batch_len, 0, len - ENTRY_HDR_SIZE - batch_len);
    out->base = p;
    out->len = len;
    return p + ENTRY_HDR_SIZE;
}

int entry_wrap(const uint8_t *batch, size_t batch_len, struct raft_buffer *out)
{
    uint8_t *p;

    if (batch_len > (1u << 20)) {
        return ENTRY_E_TOOBIG;
    }
    p = entry_alloc(batch_len, out);
    if (p == NULL) {
        return ENTRY_E_NOMEM;
    }
    if (batch_len > 0) {
        memcpy(p, batch, batch_len);
    }
    return 0;
}

int entry_unwrap(const void *buf,
                 size_t len,
                 const uint8_t **batch,
                 size_t *batch_len)
{
    const uint8_t *p = buf;
    uint32_t n;

    if (len < ENTRY_HDR_SIZE || len % 8 != 0 || len > ENTRY_MAX ||
        le_get32(p) != ENTRY_MAGIC) {
        return ENTRY_E_MALFORMED;
    }
    n = le_get32(p + 4);
    if (n > (1u << 20) || entry_size(n) != len) {
        return ENTRY_E_MALFORMED;
    }
    for (size_t i = ENTRY_HDR_SIZE + n; i < len; i++) {
        if (p[i] != 0) {
            return ENTRY_E_MALFORMED;
        }
    }
    *batch = p + ENTRY_HDR_SIZE;
    *batch_len = n;
    return 0;
}
