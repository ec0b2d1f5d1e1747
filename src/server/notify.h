/* server/notify.h: tell a service manager (systemd's Type=notify) when this
 * node is ready, through libsystemd's sd_notify (docs/server.md, "Service
 * manager notification").
 *
 * Only when the environment has NOTIFY_SOCKET (read once, at notify_init):
 * without it onced sends nothing and this costs one branch per tick.
 * "Ready" is the rule of /readyz (metrics_unready, metrics.h): a member of
 * a bootstrapped cluster that knows a leader and has applied within
 * METRICS_READY_LAG entries of its commit. READY=1 is sent once, the first
 * tick that rule holds; a service manager has no "not ready again", so
 * later changes only update STATUS= (what `systemctl status` shows: the
 * reason /readyz would give). STOPPING=1 is sent when the stop begins.
 * With WatchdogSec= (WATCHDOG_USEC, read at notify_init) the tick also
 * sends WATCHDOG=1 every half period, from the loop itself: like /healthz,
 * a loop that stops turning stops the pings and systemd restarts the node.
 *
 * Ownership: struct notify lives in struct server; it holds no resource
 * (sd_notify opens and closes its socket per message). Loop thread only. */
#ifndef ONCE_SERVER_NOTIFY_H_
#define ONCE_SERVER_NOTIFY_H_

#include <stdbool.h>
#include <stdint.h>

struct server;

struct notify
{
    bool enabled;    /* NOTIFY_SOCKET was set at start */
    bool ready_sent; /* READY=1 went out */
    bool stopping_sent;
    uint64_t watchdog_ms; /* half of WATCHDOG_USEC; 0: no watchdog */
    uint64_t last_ping_ms;
    char last_status[160]; /* the STATUS= text last sent */
};

/* Read NOTIFY_SOCKET. Never fails. */
void notify_init(struct notify *n);

/* From the node's tick (@now_ms: the loop's monotonic time): READY=1 the
 * first time @s is ready, STATUS= when the readiness reason changes,
 * WATCHDOG=1 when a half watchdog period has passed. */
void notify_tick(struct notify *n, struct server *s, uint64_t now_ms);

/* From node_stop: STOPPING=1 (once). */
void notify_stopping(struct notify *n);

#endif
