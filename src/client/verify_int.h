/* client/verify_int.h: the parts of verify.c that its tests and its fuzz
 * target reach directly (libonce.so exports only once_*).
 *
 * All pure: no clock, no global state; each function bounds its input
 * before reading it and returns 0 or a VERIFY_E_* code (common/err.h). */
#ifndef ONCE_CLIENT_VERIFY_INT_H_
#define ONCE_CLIENT_VERIFY_INT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "once_verify.h"

enum { ERR_VERIFY_CODES(ERR_ENUM) }; /* common/err.h */

enum sig_kind {
    SIG_OTHER = 0, /* an unknown version, or one that cannot match */
    SIG_V1 = 1,    /* HMAC-SHA256 */
    SIG_V1A = 2,   /* Ed25519 (Standard Webhooks) */
};

struct verify_sig
{
    enum sig_kind kind;
    uint8_t bytes[64];
    size_t len;
};

/* The signatures of one header; for Stripe also its timestamp, kept as
 * the text it was signed as. */
struct verify_sigs
{
    size_t n;
    struct verify_sig sigs[ONCE_VERIFY_SIGS_MAX];
    bool has_ts;
    uint64_t ts;
    char ts_text[ONCE_VERIFY_TIMESTAMP_MAX];
    size_t ts_len;
};

/* One piece of the signed content (the content is their concatenation). */
struct verify_part
{
    const uint8_t *p;
    size_t len;
};

/* Standard base64 (RFC 4648 §4), padding optional but canonical: unused
 * trailing bits must be zero. */
int verify_b64_decode(const char *s,
                      size_t len,
                      uint8_t *out,
                      size_t cap,
                      size_t *out_len);
/* 1..12 ASCII digits. */
int verify_parse_timestamp(const char *s, size_t len, uint64_t *out);
/* webhook-signature: space-separated "version,base64" entries. */
int verify_parse_standard_sigs(const char *s,
                               size_t len,
                               struct verify_sigs *out);
/* Stripe-Signature: comma-separated "k=v" items, exactly one t. */
int verify_parse_stripe_sigs(const char *s,
                             size_t len,
                             struct verify_sigs *out);
/* A message id: 1..ONCE_KEY_MAX visible ASCII bytes (@no_dot: no '.'). */
int verify_check_id(const char *s, size_t len, bool no_dot);
/* The "id" string of a JSON object body into @id (ONCE_KEY_MAX + 1). */
int verify_stripe_id(const uint8_t *body, size_t len, char *id, size_t *id_len);
/* 0 and the matching key if any signature of @sigs matches any key of @v
 * over the concatenated @parts; VERIFY_E_SIGNATURE if none. */
int verify_match(const once_verifier *v,
                 const struct verify_sigs *sigs,
                 const struct verify_part *parts,
                 size_t n_parts,
                 size_t *key_index,
                 bool *ed25519);

#endif /* ONCE_CLIENT_VERIFY_INT_H_ */
