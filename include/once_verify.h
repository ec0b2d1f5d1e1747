/* once_verify.h: verify a signed webhook, then claim it, in libonce.
 *
 * Two signature schemes are understood:
 *
 *   - Standard Webhooks: headers `webhook-id`, `webhook-timestamp` (unix
 *     seconds) and `webhook-signature`, a space-separated list of
 *     `v1,<base64 HMAC-SHA256>` and `v1a,<base64 Ed25519>` signatures over
 *     the bytes "id.timestamp.body". An HMAC secret is `whsec_` + base64
 *     (the prefix may be left out, as the reference libraries allow); an
 *     Ed25519 public key is `whpk_` + base64 of its 32 bytes. Unknown
 *     versions in the list are ignored, as the specification asks.
 *   - Stripe: header `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=...]`,
 *     the hex HMAC-SHA256 of "t.body" keyed with the endpoint secret's bytes
 *     as given (`whsec_...` included). Other schemes (v0) are ignored. The
 *     scheme has no id header: the message id is the `id` string of the
 *     JSON object in the body (parsed with jansson), read only after the
 *     signature matched.
 *
 * A verifier holds up to ONCE_VERIFY_SECRETS_MAX secrets: a message is
 * authentic if any signature of its header matches any secret, which is
 * how a sender and a receiver rotate secrets without a flag day. Every
 * comparison of a computed signature is constant-time (CRYPTO_memcmp).
 *
 * once_verify_and_claim verifies, then claims (scope = the caller's tenant
 * or channel, key = the message id, ts = the signed timestamp, window =
 * the tolerance, payload hash = SHA-256 of the body) in one call. The
 * timestamp window is the cluster's decision, taken with its replicated
 * log time (docs/design.md §1.7-8): the caller's own clock is never read,
 * so a receiver whose clock is off can neither accept an old message nor
 * reject a fresh one by mistake. Nothing is claimed unless the signature
 * matched, so a forger cannot burn a genuine message's id.
 *
 * Threads: a verifier is immutable once its secrets are added; after that
 * any number of threads may call once_verify (and once_verify_and_claim,
 * each with its own client) with it at once. Building it (new, add) is
 * single-threaded. Everything passed in is borrowed for the call.
 *
 * Bounds (each external input is checked before use): a signature header
 * at most ONCE_VERIFY_HEADER_MAX bytes with at most ONCE_VERIFY_SIGS_MAX
 * entries, a timestamp of at most 12 digits, a message id 1..ONCE_KEY_MAX
 * printable ASCII bytes (for Standard Webhooks without '.', which would
 * make "id.timestamp.body" ambiguous), a body of at most
 * ONCE_VERIFY_BODY_MAX bytes. */
#ifndef ONCE_VERIFY_H_
#define ONCE_VERIFY_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "once.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ONCE_VERIFY_SECRETS_MAX   16
#define ONCE_VERIFY_SECRET_MAX    512 /* bytes of one secret's text */
#define ONCE_VERIFY_HEADER_MAX    8192
#define ONCE_VERIFY_SIGS_MAX      32
#define ONCE_VERIFY_TIMESTAMP_MAX 12 /* digits */
#define ONCE_VERIFY_BODY_MAX      (16u << 20)
#define ONCE_VERIFY_REASON_MAX    160
#define ONCE_VERIFY_TOLERANCE_DEF 300000u /* ms: 5 minutes */

enum once_scheme {
    ONCE_SCHEME_STANDARD = 1, /* Standard Webhooks */
    ONCE_SCHEME_STRIPE = 2,
};

typedef struct once_verifier once_verifier;

/* A verifier of @scheme with no secret yet. 0, or a negated errno with a
 * message: -EINVAL (unknown scheme), -ENOMEM, -ENOTSUP (OpenSSL offers no
 * HMAC). */
int once_verifier_new(enum once_scheme scheme,
                      once_verifier **out,
                      char *err,
                      size_t errlen);
/* Add one secret (@len bytes of text, surrounding whitespace ignored).
 * 0, or a negated errno with a message that never quotes the secret:
 * -EINVAL for a secret that does not parse, -EEXIST for a duplicate,
 * -ENOSPC for more than ONCE_VERIFY_SECRETS_MAX. */
int once_verifier_add(once_verifier *v,
                      const char *secret,
                      size_t len,
                      char *err,
                      size_t errlen);
size_t once_verifier_count(const once_verifier *v);
enum once_scheme once_verifier_scheme(const once_verifier *v);
/* Wipe the keys (OPENSSL_cleanse) and free. NULL-safe. */
void once_verifier_free(once_verifier *v);

/* One received message, borrowed. For Stripe only signature and body are
 * read (id and timestamp may be NULL). A missing header is NULL. */
struct once_webhook
{
    const char *id; /* webhook-id */
    size_t id_len;
    const char *timestamp; /* webhook-timestamp */
    size_t timestamp_len;
    const char *signature; /* webhook-signature, or Stripe-Signature */
    size_t signature_len;
    const uint8_t *body;
    size_t body_len;
};

enum once_verify_status {
    ONCE_VERIFY_OK = 0,
    ONCE_VERIFY_MALFORMED = 1,     /* a header missing, over a bound, garbage */
    ONCE_VERIFY_BAD_SIGNATURE = 2, /* well formed; no signature matches */
};

struct once_verified
{
    char id[ONCE_KEY_MAX + 1]; /* the message id, NUL-terminated */
    size_t id_len;
    uint64_t ts_s;       /* the signed timestamp, unix seconds */
    size_t secret_index; /* which secret (order of adding) matched */
    bool ed25519;        /* the match was a v1a signature */
    char reason[ONCE_VERIFY_REASON_MAX]; /* why not OK; never a secret */
};

/* Verify @w with @v's secrets. Fills @out (zeroed first); the id and
 * timestamp are set only with ONCE_VERIFY_OK. Reads no clock. */
enum once_verify_status once_verify(const once_verifier *v,
                                    const struct once_webhook *w,
                                    struct once_verified *out);

/* A local window check for callers without a cluster:
 * 0 if now - tolerance <= ts <= now + tolerance (both edges included),
 * -1 if older (stale), 1 if newer (future). All in milliseconds. */
int once_verify_window(uint64_t ts_ms, uint64_t now_ms, uint64_t tolerance_ms);

/* ------------------------------------------------------------------------
 * Verify, then claim.
 * ---------------------------------------------------------------------- */

enum once_vc_outcome {
    ONCE_VC_ACCEPTED = 1,    /* first use: process it (r: owner token) */
    ONCE_VC_REPLAYED = 2,    /* NONCE kind: seen before */
    ONCE_VC_DUPLICATE = 3,   /* completed before: r->result is its result */
    ONCE_VC_IN_PROGRESS = 4, /* another owner holds it: r->retry_after_ms */
    ONCE_VC_CONFLICT = 5,    /* same id, another body (or kind) */
    ONCE_VC_FAILED = 6,      /* failed terminally: r->stored_error */
    ONCE_VC_STALE = 7,       /* signed timestamp older than the window */
    ONCE_VC_FUTURE = 8,      /* signed timestamp beyond the cluster's skew */
    ONCE_VC_BAD_SIGNATURE = 9,
    ONCE_VC_MALFORMED = 10,   /* header garbage (ver->reason) */
    ONCE_VC_UNAVAILABLE = 11, /* no decision: reject, let the sender retry
                                 (fail closed); r->applied says more */
    ONCE_VC_REFUSED = 12,     /* the cluster refused an argument (a window
                                 over its max_window, ...): r->error */
};

struct once_vc_args
{
    const uint8_t *scope; /* tenant or channel, 1..128 bytes */
    size_t scope_len;
    enum once_kind kind;         /* 0 or ONCE_IDEMPOTENT; ONCE_NONCE: replay
                                    protection only (no payload hash, no lease) */
    uint64_t tolerance_ms;       /* the claim window; 0: 5 minutes */
    uint64_t lease_ms;           /* IDEMPOTENT; 0: the cluster's default */
    const uint8_t *execution_id; /* evidence, 0..128 bytes */
    size_t execution_id_len;
    uint32_t timeout_ms; /* 0: the client's */
};

/* Verify @w, then claim it on @c. @ver gets the verification (id,
 * timestamp, reason), @r the claim's answer (initialised by the caller;
 * cleared first; untouched but cleared when verification failed). */
enum once_vc_outcome once_verify_and_claim(once_client *c,
                                           const once_verifier *v,
                                           const struct once_webhook *w,
                                           const struct once_vc_args *a,
                                           struct once_verified *ver,
                                           struct once_result *r);

/* "ACCEPTED", "BAD_SIGNATURE", ...; "?" for other values. */
const char *once_vc_outcome_name(enum once_vc_outcome o);

/* SHA-256 of @len bytes into @out (the payload hash the call uses). */
void once_body_hash(const uint8_t *body, size_t len, uint8_t out[32]);

#ifdef __cplusplus
}
#endif

#endif /* ONCE_VERIFY_H_ */
