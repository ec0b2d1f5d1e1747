/* client/verify_claim.c: once_verify_and_claim, a verified message's claim
 * (include/once_verify.h).
 *
 * The order is the point: the signature is checked before anything is
 * sent, so an unauthenticated request can neither create nor deny a
 * record; the window is checked by the cluster, with log time, so the
 * receiver's clock decides nothing. */
#include <string.h>

#include "once_verify.h"

#define TS_S_MAX ((UINT64_C(1) << 48) / 1000u) /* records keep 48-bit ms */

static enum once_vc_outcome from_outcome(enum once_outcome o)
{
    switch (o) {
        case ONCE_ACCEPTED:
            return ONCE_VC_ACCEPTED;
        case ONCE_REPLAYED:
            return ONCE_VC_REPLAYED;
        case ONCE_DUPLICATE:
            return ONCE_VC_DUPLICATE;
        case ONCE_IN_PROGRESS:
            return ONCE_VC_IN_PROGRESS;
        case ONCE_CONFLICT:
            return ONCE_VC_CONFLICT;
        case ONCE_FAILED:
            return ONCE_VC_FAILED;
        case ONCE_STALE:
            return ONCE_VC_STALE;
        case ONCE_FUTURE:
            return ONCE_VC_FUTURE;
        case ONCE_REFUSED_ARGUMENT:
            return ONCE_VC_REFUSED;
        default:
            /* OUT_OF_SPACE and anything unexpected: no first use was
             * recorded, so the only safe answer is "not now". */
            return ONCE_VC_UNAVAILABLE;
    }
}

enum once_vc_outcome once_verify_and_claim(once_client *c,
                                           const once_verifier *v,
                                           const struct once_webhook *w,
                                           const struct once_vc_args *a,
                                           struct once_verified *ver,
                                           struct once_result *r)
{
    uint8_t hash[32];
    struct once_claim cl;
    enum once_verify_status st;
    enum once_kind kind;

    once_result_clear(r);
    st = once_verify(v, w, ver);
    if (st == ONCE_VERIFY_BAD_SIGNATURE) {
        return ONCE_VC_BAD_SIGNATURE;
    }
    if (st != ONCE_VERIFY_OK) {
        return ONCE_VC_MALFORMED;
    }
    if (ver->ts_s > TS_S_MAX) {
        /* Authentic but absurd: far beyond any skew, as the cluster
         * would say. */
        return ONCE_VC_FUTURE;
    }
    kind = a->kind == ONCE_NONCE ? ONCE_NONCE : ONCE_IDEMPOTENT;
    memset(&cl, 0, sizeof cl);
    cl.scope = a->scope;
    cl.scope_len = a->scope_len;
    cl.key = (const uint8_t *)ver->id;
    cl.key_len = ver->id_len;
    cl.kind = kind;
    cl.execution_id = a->execution_id;
    cl.execution_id_len = a->execution_id_len;
    cl.has_ts = true;
    cl.ts_ms = ver->ts_s * 1000u;
    cl.window_ms =
        a->tolerance_ms != 0 ? a->tolerance_ms : ONCE_VERIFY_TOLERANCE_DEF;
    if (kind == ONCE_IDEMPOTENT) {
        once_body_hash(w->body, w->body_len, hash);
        cl.payload_hash = hash;
        cl.payload_hash_len = sizeof hash;
        cl.lease_ms = a->lease_ms;
    }
    cl.timeout_ms = a->timeout_ms;
    if (once_claim(c, &cl, r) != ONCE_STATUS_OK) {
        return r->status == ONCE_STATUS_INVALID_ARGUMENT ? ONCE_VC_REFUSED
                                                         : ONCE_VC_UNAVAILABLE;
    }
    return from_outcome(r->outcome);
}

const char *once_vc_outcome_name(enum once_vc_outcome o)
{
    static const char *const names[] = {
        [ONCE_VC_ACCEPTED] = "ACCEPTED",
        [ONCE_VC_REPLAYED] = "REPLAYED",
        [ONCE_VC_DUPLICATE] = "DUPLICATE",
        [ONCE_VC_IN_PROGRESS] = "IN_PROGRESS",
        [ONCE_VC_CONFLICT] = "CONFLICT",
        [ONCE_VC_FAILED] = "FAILED",
        [ONCE_VC_STALE] = "STALE",
        [ONCE_VC_FUTURE] = "FUTURE",
        [ONCE_VC_BAD_SIGNATURE] = "BAD_SIGNATURE",
        [ONCE_VC_MALFORMED] = "MALFORMED",
        [ONCE_VC_UNAVAILABLE] = "UNAVAILABLE",
        [ONCE_VC_REFUSED] = "REFUSED",
    };

    if ((unsigned)o >= sizeof names / sizeof names[0] || names[o] == NULL) {
        return "?";
    }
    return names[o];
}
