/* ingress/keyring.c: the secrets in force, shared by every request thread
 * and swapped whole by a SIGHUP reload (ingress.h).
 *
 * A reader holds a reference for one request, so a reload never frees a
 * verifier under a request that is still checking a signature with it;
 * the mutex is held only to count. */
#include <errno.h>
#include <stdlib.h>

#include "ingress/ingress.h"

static struct keyset *keyset_new(once_verifier *v)
{
    struct keyset *ks = calloc(1, sizeof *ks);

    if (ks != NULL) {
        ks->v = v;
        ks->refs = 1; /* the ring's */
    }
    return ks;
}

static void keyset_unref_locked(struct keyset *ks)
{
    if (--ks->refs == 0) {
        once_verifier_free(ks->v);
        free(ks);
    }
}

int keyring_init(struct keyring *k, once_verifier *v)
{
    pthread_mutex_init(&k->mu, NULL);
    k->cur = keyset_new(v);
    return k->cur != NULL ? 0 : -ENOMEM;
}

int keyring_swap(struct keyring *k, once_verifier *v)
{
    struct keyset *ks = keyset_new(v);
    struct keyset *old;

    if (ks == NULL) {
        return -ENOMEM;
    }
    pthread_mutex_lock(&k->mu);
    old = k->cur;
    k->cur = ks;
    keyset_unref_locked(old);
    pthread_mutex_unlock(&k->mu);
    return 0;
}

struct keyset *keyring_get(struct keyring *k)
{
    struct keyset *ks;

    pthread_mutex_lock(&k->mu);
    ks = k->cur;
    ks->refs++;
    pthread_mutex_unlock(&k->mu);
    return ks;
}

void keyring_put(struct keyring *k, struct keyset *ks)
{
    pthread_mutex_lock(&k->mu);
    keyset_unref_locked(ks);
    pthread_mutex_unlock(&k->mu);
}

void keyring_destroy(struct keyring *k)
{
    if (k->cur != NULL) {
        keyset_unref_locked(k->cur);
        k->cur = NULL;
    }
    pthread_mutex_destroy(&k->mu);
}
