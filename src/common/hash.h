/* common/hash.h: keyed 64-bit hashing (SipHash-2-4).
 *
 * The state machine partitions records by a keyed hash of (scope, key) so
 * that callers cannot aim many keys at one table slot or partition. The key
 * is replicated state (chosen at bootstrap), so every replica computes the
 * same hash: the function is part of the replicated state's definition and
 * must never change its output (snapshots and the wheel rely on it).
 *
 * SipHash-2-4 is computed here, not through OpenSSL's EVP_MAC: the EVP
 * layer's dispatch (init + 2 updates + final through the provider) cost
 * ~1,080 instructions per claim on the leader, 5 % of all its work
 * (bench/cpu/run, 2026-12-07), against ~200 for the function itself. The
 * output is checked against the SipHash paper's vectors and against
 * OpenSSL's SIPHASH on random inputs (tests/unit/common/test_hash.c), so
 * OpenSSL stays the oracle. SipHash is used here as a table hash resistant
 * to chosen collisions, not for authentication. A struct hash_keyed is a
 * value (the expanded key): no allocation, any number may be copied. */
#ifndef ONCE_COMMON_HASH_H_
#define ONCE_COMMON_HASH_H_

#include <stddef.h>
#include <stdint.h>

struct hash_keyed
{
    uint64_t k0, k1; /* the key as two little-endian words */
};

/* Initialise with a 16-byte key (copied). Returns 0 (kept as an int for the
 * callers' error paths: it cannot fail). */
int hash_keyed_init(struct hash_keyed *h, const uint8_t key[16]);

/* Change the key. Returns 0. */
int hash_keyed_rekey(struct hash_keyed *h, const uint8_t key[16]);

/* Forget the key (zeroed). */
void hash_keyed_close(struct hash_keyed *h);

/* SipHash-2-4 of the concatenation of @a and @b (both borrowed), as a
 * little-endian 64-bit integer. */
uint64_t hash_keyed2(const struct hash_keyed *h,
                     const void *a,
                     size_t a_len,
                     const void *b,
                     size_t b_len);

#endif /* ONCE_COMMON_HASH_H_ */
