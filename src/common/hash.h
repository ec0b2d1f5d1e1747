/* common/hash.h: keyed 64-bit hashing (SipHash-2-4 from OpenSSL 3).
 *
 * The state machine partitions records by a keyed hash of (scope, key) so
 * that callers cannot aim many keys at one table slot or partition. The key
 * is replicated state (chosen at bootstrap), so every replica computes the
 * same hash. OpenSSL's EVP_MAC costs ~50 ns per call once the context is
 * initialised (re-init with a NULL key keeps the key schedule). Not
 * thread-safe per instance. */
#ifndef ONCE_COMMON_HASH_H_
#define ONCE_COMMON_HASH_H_

#include <stddef.h>
#include <stdint.h>

struct hash_keyed
{
    void *ctx; /* EVP_MAC_CTX * */
};

/* Initialise with a 16-byte key (borrowed). Returns 0 or -ENOMEM / -EINVAL
 * (SipHash not available in this OpenSSL). */
int hash_keyed_init(struct hash_keyed *h, const uint8_t key[16]);

/* Change the key. Returns 0 or a negative error; on error the old key stays. */
int hash_keyed_rekey(struct hash_keyed *h, const uint8_t key[16]);

void hash_keyed_close(struct hash_keyed *h);

/* SipHash-2-4 of the concatenation of @a and @b (both borrowed), as a
 * little-endian 64-bit integer. */
uint64_t hash_keyed2(struct hash_keyed *h,
                     const void *a,
                     size_t a_len,
                     const void *b,
                     size_t b_len);

#endif /* ONCE_COMMON_HASH_H_ */
