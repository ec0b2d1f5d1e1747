/* ingress/main.c: once-ingress's main(): flags, secrets, the listeners,
 * and the signal loop (SIGHUP reloads the secrets; SIGTERM and SIGINT
 * stop). docs/ingress.md is the manual.
 *
 * The signals are blocked before any thread starts, so every thread
 * inherits the mask and only this loop (sigwait) ever sees them: a
 * reload never interrupts a request. */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "ingress/ingress.h"

static void reload(struct ingress *g)
{
    once_verifier *v;
    char msg[ERR_MSG_SIZE];

    if (ingress_load_secrets(&g->cfg, &v, msg) != 0) {
        char q[ERR_MSG_SIZE + 16];

        atomic_fetch_add_explicit(&g->metrics.reloads_failed, 1,
                                  memory_order_relaxed);
        log_kv(LOG_ERROR, "secrets not reloaded; the old ones stay", "error=%s",
               log_quote(msg, q, sizeof q));
        return;
    }
    atomic_store(&g->metrics.secrets, once_verifier_count(v));
    if (keyring_swap(&g->keys, v) != 0) {
        once_verifier_free(v);
        log_kv(LOG_ERROR, "secrets not reloaded: out of memory", NULL);
        return;
    }
    atomic_fetch_add_explicit(&g->metrics.reloads_ok, 1, memory_order_relaxed);
    log_kv(LOG_INFO, "secrets reloaded", "count=%zu", once_verifier_count(v));
}

static int wait_for_signals(struct ingress *g, const sigset_t *set)
{
    for (;;) {
        int sig = 0;

        if (sigwait(set, &sig) != 0) {
            return 1;
        }
        if (sig == SIGHUP && g->cfg.mode == INGRESS_MODE_IDEM) {
            continue; /* no secrets to reload */
        }
        if (sig == SIGHUP) {
            reload(g);
            continue;
        }
        log_kv(LOG_INFO, "stopping", "signal=%d", sig);
        return 0;
    }
}

static int start(struct ingress *g, const sigset_t *set)
{
    once_verifier *v;
    char msg[ERR_MSG_SIZE];
    char q[ERR_MSG_SIZE + 16];
    char host[64] = "host";
    char uq[INGRESS_URL_MAX + 8];
    int rv;

    if (g->cfg.mode == INGRESS_MODE_IDEM) {
        v = NULL; /* no signatures: the keyring stays empty */
        if (idem_tls_load(g, msg) != 0) {
            fprintf(stderr, "once-ingress: %s\n", msg);
            return 1;
        }
    } else if (ingress_load_secrets(&g->cfg, &v, msg) != 0) {
        fprintf(stderr, "once-ingress: %s\n", msg);
        return 1;
    } else {
        atomic_store(&g->metrics.secrets, once_verifier_count(v));
    }
    if (keyring_init(&g->keys, v) != 0) {
        once_verifier_free(v);
        return 1;
    }
    gethostname(host, sizeof host - 1);
    snprintf(g->execution_id, sizeof g->execution_id, "once-ingress:%s:%ld",
             host, (long)getpid());
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "once-ingress: curl_global_init failed\n");
        keyring_destroy(&g->keys);
        return 1;
    }
    rv = ingress_server_start(g, msg);
    if (rv != 0) {
        log_kv(LOG_ERROR, "could not start", "error=%s",
               log_quote(msg, q, sizeof q));
        curl_global_cleanup();
        keyring_destroy(&g->keys);
        return 1;
    }
    log_kv(LOG_INFO, "ready",
           "mode=%s listen=%s http_addr=%s upstream=%s scheme=%s secrets=%zu "
           "threads=%u",
           g->cfg.mode == INGRESS_MODE_IDEM ? "idempotency-key" : "webhook",
           g->cfg.listen, g->cfg.http_addr[0] != '\0' ? g->cfg.http_addr : "-",
           log_quote(g->cfg.upstream, uq, sizeof uq),
           g->cfg.mode == INGRESS_MODE_IDEM        ? "-"
           : g->cfg.scheme == ONCE_SCHEME_STANDARD ? "standard"
                                                   : "stripe",
           v != NULL ? once_verifier_count(v) : 0, g->cfg.threads);
    rv = wait_for_signals(g, set);
    ingress_server_stop(g);
    curl_global_cleanup();
    keyring_destroy(&g->keys);
    return rv;
}

int main(int argc, char **argv)
{
    struct ingress *g = calloc(1, sizeof *g);
    char msg[ERR_MSG_SIZE];
    sigset_t set;
    int rv;

    if (g == NULL) {
        return 1;
    }
    rv = ingress_config_parse(&g->cfg, argc, argv, msg);
    if (rv == 1) {
        fputs(ingress_usage(), stdout);
        fputs(idem_usage(), stdout);
        free(g);
        return 0;
    }
    if (rv != 0) {
        fprintf(stderr, "once-ingress: %s\n", msg);
        free(g);
        return 2;
    }
    log_set_level((enum log_level)g->cfg.log_level);
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    rv = start(g, &set);
    idem_tls_free(g);
    free(g);
    return rv;
}
