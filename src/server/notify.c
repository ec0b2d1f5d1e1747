/* server/notify.c: sd_notify for systemd's Type=notify (notify.h). */
#include "server/notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "common/log.h"
#include "server/metrics.h"
#include "server/server.h"

void notify_init(struct notify *n)
{
    const char *sock = getenv("NOTIFY_SOCKET");

    uint64_t usec = 0;

    memset(n, 0, sizeof *n);
    n->enabled = sock != NULL && sock[0] != '\0';
    /* > 0 only with WATCHDOG_USEC set (and WATCHDOG_PID, if set, ours). */
    if (n->enabled && sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000) {
        n->watchdog_ms = usec / 2000;
    }
}

/* One message; a failure is logged and not retried: the service manager
 * times the start out on its own (TimeoutStartSec), and the node serves on
 * regardless of whether anyone listens. */
static void send_state(const char *state)
{
    int rv = sd_notify(0, state);

    if (rv < 0) {
        log_kv(LOG_WARN, "sd_notify failed", "error=%s",
               log_quote(strerror(-rv), (char[96]){0}, 96));
    }
}

void notify_tick(struct notify *n, struct server *s, uint64_t now_ms)
{
    char why[160], status[160], msg[200];
    const char *no;

    if (!n->enabled || n->stopping_sent) {
        return;
    }
    if (n->watchdog_ms != 0 && now_ms - n->last_ping_ms >= n->watchdog_ms) {
        n->last_ping_ms = now_ms;
        send_state("WATCHDOG=1");
    }
    no = metrics_unready(s, why, sizeof why);
    snprintf(status, sizeof status, "%s%s",
             no == NULL ? "ready" : "not ready: ", no == NULL ? "" : no);
    if (no == NULL && !n->ready_sent) {
        n->ready_sent = true;
        snprintf(msg, sizeof msg, "READY=1\nSTATUS=%s", status);
        send_state(msg);
        snprintf(n->last_status, sizeof n->last_status, "%s", status);
        log_kv(LOG_INFO, "told the service manager: ready", NULL);
        return;
    }
    if (strcmp(status, n->last_status) != 0) {
        snprintf(n->last_status, sizeof n->last_status, "%s", status);
        snprintf(msg, sizeof msg, "STATUS=%s", status);
        send_state(msg);
    }
}

void notify_stopping(struct notify *n)
{
    if (!n->enabled || n->stopping_sent) {
        return;
    }
    n->stopping_sent = true;
    send_state("STOPPING=1\nSTATUS=stopping");
}
