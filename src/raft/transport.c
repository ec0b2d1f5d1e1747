/* raft/transport.c: see transport.h.
 *
 * A link goes through: (outbound) TCP connect; (TLS) the handshake and the
 * member hook; (inbound) raft_uv_tcp's handshake read from the peer,
 * (outbound) ours written to it; then the socketpair, and raft gets its end
 * ("handed"). A link that closes before it was handed tells raft nothing
 * (inbound) or fails raft's connect request (outbound) once its handles
 * have closed, never from inside a call raft made. */
#include "raft/transport.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/addr.h"
#include "common/assert.h"
#include "tls/splice.h"

#define ADDR_MAX    256 /* raft addresses, NUL included */
#define HS_PROTOCOL 1   /* raft_uv_tcp's handshake version */
#define HS_FIXED    24  /* protocol, id, address length */
#define CHUNK       (64u * 1024)

struct transport
{
    struct raft_uv_transport *rt;
    uv_loop_t *loop;
    struct transport_config cfg;
    raft_id id;
    char address[ADDR_MAX];
    uv_tcp_t listener;
    bool listening;
    raft_uv_accept_cb accept_cb;
    raft_uv_transport_close_cb close_cb;
    struct link *links; /* open ones */
    unsigned n_links;   /* allocated, not yet freed */
    bool closing;
    bool close_fired;
    struct transport_stats st;
};

struct link
{
    struct transport *t;
    struct link *prev, *next;
    bool inbound;
    /* Plaintext outbound: once our handshake is written, raft gets the TCP
     * socket itself (hand_direct), no socketpair, no copy. */
    bool direct;
    uv_tcp_t *tcp;       /* raft_malloc'd; NULL once handed (direct) */
    uv_pipe_t local;     /* our end of the socketpair */
    uv_pipe_t *raft_end; /* raft's end (raft_malloc'd) */
    uv_timer_t timer;    /* the handshake deadline */
    uv_connect_t creq;   /* outbound */
    unsigned handles;    /* ours still open */
    bool closing;
    bool local_open;
    bool handed; /* raft has raft_end */
    struct tls_session tls;
    bool tls_on;
    struct tls_splice sp; /* net: tcp, local: local; from link_start */
    /* Outbound: raft's request, until handed or failed. */
    struct raft_uv_connect *req;
    int req_status; /* given to req->cb when the link is freed */
    char peer[ADDR_MAX];
    uint64_t peer_id; /* outbound: the id raft dials */
    /* TLS with a bind hook: the peer's verified certificate (owned), kept
     * for transport_recheck. */
    X509 *cert;
    /* Inbound: raft_uv_tcp's handshake from the peer. */
    uint8_t hs[HS_FIXED];
    unsigned hs_n;
    uint64_t addr_len, addr_n;
    char addr[ADDR_MAX];
    struct rframe fr;
};

/* Reads are consumed before the next one starts (libuv runs alloc, read
 * and the callback back to back on the loop thread): one buffer each. */
static uint8_t net_buf[CHUNK];
static uint8_t plain_buf[CHUNK];
static uint8_t local_buf[CHUNK];

static void tlog(struct transport *t, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void tlog(struct transport *t, const char *level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (t->cfg.log == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    t->cfg.log(t->cfg.arg, level, msg);
}

static uint64_t le64_of(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static bool tls_wanted(const struct tls_slot *s)
{
    return s != NULL && s->ctx != NULL;
}

/* "IP:PORT" (IPv4 literal, as raft_uv_tcp 0.15 takes) into @sa, and its
 * IP as text into @ip (INET_ADDRSTRLEN bytes): the name TLS checks. */
static bool parse_addr(const char *addr, struct sockaddr_in *sa, char *ip)
{
    if (!addr_parse_ipv4(addr, ADDR_PORT_STRTOUL, sa)) {
        return false;
    }
    /* inet_pton took only the canonical dotted quad: this is its text. */
    return inet_ntop(AF_INET, &sa->sin_addr, ip, INET_ADDRSTRLEN) != NULL;
}

/* --- closing ------------------------------------------------------------- */

static void transport_maybe_closed(struct transport *t)
{
    if (t->closing && !t->close_fired && !t->listening && t->n_links == 0) {
        ONCE_ASSERT(t->links == NULL, "every open link is also allocated");
        t->close_fired = true;
        t->close_cb(t->rt);
    }
}

static void link_freed(struct link *l)
{
    struct transport *t = l->t;
    struct raft_uv_connect *req = l->req;
    int status = t->closing ? RAFT_CANCELED : l->req_status;

    ONCE_ASSERT(l->closing && l->handles == 0 && t->n_links > 0,
                "a link is freed once, after its last handle closed");
    tls_session_free(&l->tls);
    X509_free(l->cert);
    rframe_free(&l->fr);
    free(l);
    t->n_links--;
    if (req != NULL) {
        req->cb(req, NULL, status);
    }
    transport_maybe_closed(t);
}

static void link_handle_gone(struct link *l)
{
    ONCE_ASSERT(l->handles > 0, "one close callback per open handle");
    if (--l->handles == 0) {
        link_freed(l);
    }
}

static void on_link_handle_closed(uv_handle_t *h)
{
    link_handle_gone(h->data);
}

/* The TCP handle is raft_malloc'd: a direct link hands it to raft, which
 * raft_free()s it when it closes it. */
static void on_link_tcp_closed(uv_handle_t *h)
{
    struct link *l = h->data;

    raft_free(h);
    link_handle_gone(l);
}

static void on_raft_end_closed(uv_handle_t *h)
{
    raft_free(h);
}

static void link_close(struct link *l)
{
    struct transport *t = l->t;

    if (l->closing) {
        return;
    }
    l->closing = true;
    if (l->prev != NULL) {
        l->prev->next = l->next;
    } else {
        t->links = l->next;
    }
    if (l->next != NULL) {
        l->next->prev = l->prev;
    }
    if (l->raft_end != NULL && !l->handed) {
        uv_close((uv_handle_t *)l->raft_end, on_raft_end_closed);
        l->raft_end = NULL;
    }
    /* raft sees its end's EOF once ours is closed. */
    if (l->local_open) {
        uv_close((uv_handle_t *)&l->local, on_link_handle_closed);
    }
    uv_close((uv_handle_t *)&l->timer, on_link_handle_closed);
    if (l->tcp != NULL) {
        uv_close((uv_handle_t *)l->tcp, on_link_tcp_closed);
    }
}

/* Close @l because of something the peer did (or did not do). */
static void link_refuse(struct link *l, const char *why)
{
    l->t->st.refused++;
    tlog(l->t, "warn", "closing a Raft %s link %s %s: %s",
         l->inbound ? "inbound" : "outbound", l->inbound ? "from" : "to",
         l->inbound ? (l->addr[0] != '\0' ? l->addr : "an unknown peer")
                    : l->peer,
         why);
    link_close(l);
}

/* The bind hook for @l, which names @id at @address; false: refused,
 * counted and closed. Plaintext links have no certificate to bind. */
static bool link_bind(struct link *l, uint64_t id, const char *address)
{
    struct transport *t = l->t;
    char why[ERR_MSG_SIZE], name[128], text[ERR_MSG_SIZE + 200];

    ONCE_ASSERT(!l->tls_on || t->cfg.bind == NULL || l->cert != NULL,
                "a TLS link with a bind hook is named after its handshake, "
                "and keeps its peer's certificate from there");
    if (l->cert == NULL || t->cfg.bind == NULL) {
        return true;
    }
    if (t->cfg.bind(t->cfg.arg, l->cert, id, address, why) == 0) {
        return true;
    }
    snprintf(text, sizeof text,
             "TLS: %s may not speak as member %016llx at %.100s: %s",
             tls_cert_name(l->cert, name, sizeof name), (unsigned long long)id,
             address, why);
    t->st.bind_refused++;
    link_refuse(l, text);
    return false;
}

/* --- writes, both ways --------------------------------------------------- */

static void on_local_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);
static void on_net_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);

static void alloc_net(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h;
    (void)suggested;
    *b = uv_buf_init((char *)net_buf, sizeof net_buf);
}

static void alloc_local(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h;
    (void)suggested;
    *b = uv_buf_init((char *)local_buf, sizeof local_buf);
}

static void hand_direct(struct link *l);

static void on_written(struct tls_splice *sp, bool to_net, int status)
{
    struct link *l = sp->data;

    (void)to_net;
    if (l->closing) {
        return;
    }
    if (status != 0) {
        link_close(l);
        return;
    }
    if (l->direct && !l->handed) {
        if (sp->net_queued == 0) {
            hand_direct(l); /* UNTESTED: the handshake waited for POLLOUT */
        }
        return;
    }
    (void)tls_splice_resume(sp);
}

/* Plaintext to the peer (sealed with TLS). */
static int to_net(struct link *l, const uint8_t *p, size_t n)
{
    return tls_splice_to_net(&l->sp, p, n);
}

/* Checked bytes of the peer's to raft. */
static void to_raft(struct link *l, const uint8_t *p, size_t n)
{
    char errmsg[ERR_MSG_SIZE];
    uint64_t before = l->fr.messages;

    if (rframe_feed(&l->fr, p, n, errmsg) != 0) {
        link_refuse(l, errmsg);
        return;
    }
    l->t->st.messages += l->fr.messages - before;
    if (tls_splice_to_local(&l->sp, p, n) != 0) {
        link_close(l);
    }
}

static void on_local_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct link *l = s->data;

    if (nread < 0) {
        link_close(l); /* raft closed its end */
        return;
    }
    if (nread > 0 && to_net(l, (const uint8_t *)b->base, (size_t)nread) != 0) {
        link_close(l);
    }
}

/* --- handing raft its end ---------------------------------------------- */

static int make_pair(struct link *l, char *why)
{
    uv_os_sock_t fds[2];
    int rv =
        uv_socketpair(SOCK_STREAM, 0, fds, UV_NONBLOCK_PIPE, UV_NONBLOCK_PIPE);

    if (rv != 0) {
        err_printf(why, "socketpair: %s", uv_strerror(rv));
        return rv;
    }
    l->raft_end = raft_malloc(sizeof *l->raft_end);
    if (l->raft_end == NULL) {
        close(fds[0]); /* UNTESTED: malloc */
        close(fds[1]);
        err_printf(why, "out of memory");
        return UV_ENOMEM;
    }
    (void)uv_pipe_init(l->t->loop, l->raft_end, 0);
    (void)uv_pipe_init(l->t->loop, &l->local, 0);
    l->local.data = l;
    l->local_open = true;
    l->handles++;
    tls_splice_local(&l->sp, (uv_stream_t *)&l->local, alloc_local,
                     on_local_read);
    if (uv_pipe_open(l->raft_end, fds[1]) != 0 ||
        uv_pipe_open(&l->local, fds[0]) != 0) {
        err_printf(why, "cannot open the socketpair"); /* UNTESTED */
        return UV_EINVAL;
    }
    rv = uv_read_start((uv_stream_t *)&l->local, alloc_local, on_local_read);
    if (rv != 0) {
        err_printf(why, "read: %s", uv_strerror(rv)); /* UNTESTED */
    }
    return rv;
}

/* 0, or make_pair's negated errno after refusing (closing) @l. */
static int hand_inbound(struct link *l)
{
    struct transport *t = l->t;
    char why[ERR_MSG_SIZE];
    uv_stream_t *end;
    int rv;

    if ((rv = make_pair(l, why)) != 0) {
        link_refuse(l, why); /* UNTESTED: system resources */
        return rv;
    }
    (void)uv_timer_stop(&l->timer);
    end = (uv_stream_t *)l->raft_end;
    l->handed = true;
    t->st.accepted++;
    t->accept_cb(t->rt, (raft_id)le64_of(l->hs + 8), l->addr, end);
    return 0;
}

/* raft_uv_tcp's handshake: protocol, our id, our address (padded to 8). */
static int send_raft_handshake(struct link *l)
{
    struct transport *t = l->t;
    size_t alen = (strlen(t->address) + 1 + 7) / 8 * 8;
    uint8_t buf[HS_FIXED + ADDR_MAX + 8];
    const uint64_t v[3] = {HS_PROTOCOL, t->id, alen};

    memset(buf, 0, sizeof buf);
    for (unsigned i = 0; i < 3; i++) {
        for (unsigned k = 0; k < 8; k++) {
            buf[8 * i + k] = (uint8_t)(v[i] >> (8 * k));
        }
    }
    memcpy(buf + HS_FIXED, t->address, strlen(t->address));
    return to_net(l, buf, HS_FIXED + alen);
}

/* A direct link's handshake is written whole: raft gets the TCP handle
 * (raft_malloc'd; raft closes and raft_free()s it), and the link, now
 * only its deadline timer, closes. Our splice wrote through the handle:
 * nothing of it is in flight (net_queued 0), so no callback of ours can
 * fire on raft's stream. */
static void hand_direct(struct link *l)
{
    struct transport *t = l->t;
    struct raft_uv_connect *req = l->req;
    uv_stream_t *s = (uv_stream_t *)l->tcp;

    ONCE_ASSERT(l->direct && !l->handed && !l->closing &&
                    l->sp.net_queued == 0 && req != NULL,
                "a direct link is handed once, with no write of ours left");
    (void)uv_timer_stop(&l->timer);
    l->handed = true;
    l->req = NULL;
    l->tcp = NULL;
    s->data = NULL;
    t->st.connected++;
    link_close(l);
    /* The TCP handle is raft's now, not one of ours: last, because it may
     * be the link's last reference (its timer's close is still pending,
     * so today it is not). */
    link_handle_gone(l);
    req->cb(req, s, 0);
}

static void hand_outbound(struct link *l)
{
    struct transport *t = l->t;
    struct raft_uv_connect *req = l->req;
    char why[ERR_MSG_SIZE];

    if (send_raft_handshake(l) != 0) {
        link_close(l);
        return;
    }
    if (l->direct) {
        if (l->sp.net_queued == 0) {
            hand_direct(l);
        }
        return; /* else from on_written, once the handshake is out */
    }
    if (make_pair(l, why) != 0) {
        link_refuse(l, why); /* UNTESTED: system resources */
        return;
    }
    (void)uv_timer_stop(&l->timer);
    l->handed = true;
    l->req = NULL;
    t->st.connected++;
    req->cb(req, (uv_stream_t *)l->raft_end, 0);
}

/* --- reading the peer ---------------------------------------------------- */

/* Inbound bytes before raft has its end: raft_uv_tcp's handshake. Returns
 * how many of @n were used, or, after closing @l, TLS_E_FRAME (not raft's
 * handshake) or a negated errno (no socketpair for raft's end). */
static long read_handshake(struct link *l, const uint8_t *p, size_t n)
{
    size_t used = 0;
    int rv;

    if (l->hs_n < HS_FIXED) {
        size_t k = HS_FIXED - l->hs_n < n ? HS_FIXED - l->hs_n : n;

        memcpy(l->hs + l->hs_n, p, k);
        l->hs_n += (unsigned)k;
        used = k;
        if (l->hs_n < HS_FIXED) {
            return (long)used;
        }
        l->addr_len = le64_of(l->hs + 16);
        if (le64_of(l->hs) != HS_PROTOCOL || l->addr_len == 0 ||
            l->addr_len > ADDR_MAX) {
            link_refuse(l,
                        "not raft_uv's handshake (protocol 1, an "
                        "address of 1..256 bytes)");
            return TLS_E_FRAME;
        }
    }
    if (used < n && l->addr_n < l->addr_len) {
        size_t k = (size_t)(l->addr_len - l->addr_n) < n - used
                       ? (size_t)(l->addr_len - l->addr_n)
                       : n - used;

        memcpy(l->addr + l->addr_n, p + used, k);
        l->addr_n += k;
        used += k;
    }
    if (l->addr_n == l->addr_len) {
        if (memchr(l->addr, '\0', (size_t)l->addr_len) == NULL) {
            l->addr[0] = '\0';
            link_refuse(l, "the handshake's address is not a string");
            return TLS_E_FRAME;
        }
        if (!link_bind(l, le64_of(l->hs + 8), l->addr)) {
            return TLS_E_FRAME;
        }
        rv = hand_inbound(l);
        if (rv != 0) {
            return rv; /* UNTESTED: system resources */
        }
        ONCE_ASSERT(!l->closing, "a handed link is open");
    }
    return (long)used;
}

static void on_plain(struct link *l, const uint8_t *p, size_t n)
{
    if (!l->inbound) {
        return; /* raft_uv never reads an outbound stream */
    }
    if (!l->handed) {
        long used = read_handshake(l, p, n);

        if (used < 0) {
            return;
        }
        p += used;
        n -= (size_t)used;
    }
    if (n > 0 && l->handed) {
        to_raft(l, p, n);
    }
}

/* The handshake completed: the chain was verified against the peer CA;
 * now the member hook. true: go on. */
static bool tls_verified(struct link *l)
{
    struct transport *t = l->t;
    X509 *cert = tls_session_peer(&l->tls);
    char why[ERR_MSG_SIZE], name[128];
    int rv = 0;

    if (cert == NULL) {
        link_refuse(l, "TLS: no peer certificate"); /* UNTESTED */
        return false;
    }
    if (t->cfg.member != NULL) {
        rv = t->cfg.member(t->cfg.arg, cert, why);
    }
    if (rv != 0) {
        char text[ERR_MSG_SIZE + 160];

        snprintf(text, sizeof text, "TLS: %s is not a member: %s",
                 tls_cert_name(cert, name, sizeof name), why);
        X509_free(cert);
        link_refuse(l, text);
        return false;
    }
    if (t->cfg.bind != NULL) {
        l->cert = cert; /* bound when the peer is named, and rechecked */
    } else {
        X509_free(cert);
    }
    if (!l->inbound && link_bind(l, l->peer_id, l->peer)) {
        hand_outbound(l);
    }
    return !l->closing;
}

static void tls_read(struct link *l, const uint8_t *p, size_t n)
{
    char errmsg[ERR_MSG_SIZE], text[ERR_MSG_SIZE + 8];
    bool was_done = l->tls.done;
    int rv = tls_session_feed(&l->tls, p, n, errmsg);

    if (rv == 0 && tls_splice_flush(&l->sp) != 0) {
        link_close(l);
        return;
    }
    if (rv != 0) {
        (void)tls_splice_flush(&l->sp); /* the alert, if it can go at once */
        snprintf(text, sizeof text, "TLS: %s", errmsg);
        link_refuse(l, text);
        return;
    }
    if (!l->tls.done || (!was_done && !tls_verified(l))) {
        return;
    }
    while (!l->closing) {
        size_t got = 0;
        int k;

        /* SSL_read gives one record (at most 16 KiB) per call: gather
         * what the session holds into one chunk, so that raft's end gets
         * one write per chunk instead of one per record. */
        while ((k = tls_session_read(&l->tls, plain_buf + got,
                                     sizeof plain_buf - got, errmsg)) > 0) {
            got += (size_t)k;
            if (got == sizeof plain_buf) {
                break;
            }
        }
        if (got > 0) {
            on_plain(l, plain_buf, got);
            if (l->closing) {
                return;
            }
        }
        if (k == TLS_E_CLOSED) {
            link_close(l);
            return;
        }
        if (k < 0) {
            snprintf(text, sizeof text, "TLS: %s", errmsg);
            link_refuse(l, text);
            return;
        }
        if (k == 0) {
            return;
        }
    }
}

static void on_net_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct link *l = s->data;

    if (nread < 0) {
        link_close(l); /* EOF or error */
        return;
    }
    if (nread == 0) {
        return;
    }
    if (l->tls_on) {
        tls_read(l, (const uint8_t *)b->base, (size_t)nread);
    } else {
        on_plain(l, (const uint8_t *)b->base, (size_t)nread);
    }
}

/* --- links --------------------------------------------------------------- */

static void on_deadline(uv_timer_t *timer)
{
    struct link *l = timer->data;
    char why[96];

    if (l->handed || l->closing) {
        return; /* UNTESTED: stopped when handed */
    }
    snprintf(why, sizeof why, "no handshake within %llu ms",
             (unsigned long long)uv_timer_get_repeat(timer));
    link_refuse(l, why);
}

static struct link *link_new(struct transport *t, bool inbound)
{
    struct link *l = calloc(1, sizeof *l);
    unsigned ms = t->cfg.handshake_ms != 0 ? t->cfg.handshake_ms
                                           : TLS_HANDSHAKE_MS_DEFAULT;

    if (l == NULL) {
        return NULL; /* UNTESTED: malloc */
    }
    l->t = t;
    l->inbound = inbound;
    l->req_status = RAFT_NOCONNECTION;
    rframe_init(&l->fr, &t->cfg.limits);
    l->tcp = raft_malloc(sizeof *l->tcp);
    if (l->tcp == NULL) {
        free(l); /* UNTESTED: malloc */
        return NULL;
    }
    (void)uv_tcp_init(t->loop, l->tcp);
    l->tcp->data = l;
    (void)uv_timer_init(t->loop, &l->timer);
    l->timer.data = l;
    (void)uv_timer_start(&l->timer, on_deadline, ms, ms);
    l->handles = 2;
    l->next = t->links;
    if (t->links != NULL) {
        t->links->prev = l;
    }
    t->links = l;
    t->n_links++;
    return l;
}

/* The dead-link bound (cfg.user_timeout_ms) on @l's socket, once it has
 * one (connecting or accepted): TCP_USER_TIMEOUT closes the link when sent
 * bytes (or the SYN) stay unacknowledged that long, so a cut link ends
 * while it is cut and raft_uv's next dial gets through soon after the heal
 * instead of waiting for the retransmission backoff; keepalive probes do
 * the same for an idle link (an inbound one is never written: its peer may
 * have given it up). A failure only leaves the kernel's defaults. */
static void link_bound(struct link *l)
{
    unsigned ms = l->t->cfg.user_timeout_ms;
    int on = 1, secs = (int)((ms + 999) / 1000);
    uv_os_fd_t fd;

    if (ms == 0) {
        return;
    }
    if (uv_fileno((const uv_handle_t *)l->tcp, &fd) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &secs, sizeof secs) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &secs, sizeof secs) != 0) {
        tlog(l->t, "warn",
             "Raft link %s: no dead-link bound: %s", /* UNTESTED */
             l->inbound ? "inbound" : l->peer, strerror(errno));
    }
}

/* A direct link is never read, by us or by raft (raft_uv 0.15 only reads
 * the streams it accepted): what its peer sends waits in the kernel's
 * receive buffer, which is shrunk to its least (2,304 bytes on Linux 6.18)
 * so that such bytes stay few: 32 KiB at most here, the window already
 * offered, with a peer pushing 4 MiB over loopback. A failure only leaves
 * the default size. */
static void direct_rcvbuf(struct link *l)
{
    int least = 1; /* the kernel rounds it up to its minimum */
    uv_os_fd_t fd;

    if (uv_fileno((const uv_handle_t *)l->tcp, &fd) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &least, sizeof least) != 0) {
        tlog(l->t, "warn", "Raft link %s: receive buffer: %s", /* UNTESTED */
             l->peer, strerror(errno));
    }
}

/* TLS on @l if its direction has a context; then read (a direct link: not
 * read at all). false: closed. */
static bool link_start(struct link *l, const char *host)
{
    struct tls_slot *slot = l->inbound ? l->t->cfg.server : l->t->cfg.client;
    char errmsg[ERR_MSG_SIZE];

    (void)uv_tcp_nodelay(l->tcp, 1);
    if (tls_wanted(slot)) {
        if (tls_session_init(&l->tls, slot->ctx, l->inbound, host, errmsg) !=
            0) {
            link_refuse(l, errmsg);
            return false;
        }
        l->tls_on = true;
    }
    tls_splice_init(&l->sp, (uv_stream_t *)l->tcp, alloc_net, on_net_read,
                    l->tls_on ? &l->tls : NULL, LINK_QUEUE_MAX, on_written, l);
    if (tls_splice_flush(&l->sp) != 0) {
        link_close(l);
        return false;
    }
    if (!l->inbound && !l->tls_on) {
        l->direct = true;
        direct_rcvbuf(l);
        return true;
    }
    if (uv_read_start((uv_stream_t *)l->tcp, alloc_net, on_net_read) != 0) {
        link_close(l); /* UNTESTED */
        return false;
    }
    return true;
}

static void on_accept(uv_stream_t *listener, int status)
{
    struct transport *t = listener->data;
    struct link *l;

    if (status != 0 || t->closing) {
        return; /* UNTESTED: accept errors are retried by libuv */
    }
    l = link_new(t, true);
    if (l == NULL) {
        return; /* UNTESTED: malloc */
    }
    if (uv_accept(listener, (uv_stream_t *)l->tcp) != 0) {
        link_close(l); /* UNTESTED */
        return;
    }
    link_bound(l);
    (void)link_start(l, NULL);
}

static void on_connected(uv_connect_t *creq, int status)
{
    struct link *l = creq->data;
    char ip[INET_ADDRSTRLEN];
    struct sockaddr_in sa;

    if (l->closing) {
        return;
    }
    if (status != 0) {
        link_close(l); /* raft retries after its own delay */
        return;
    }
    (void)parse_addr(l->peer, &sa, ip);
    if (!link_start(l, ip)) {
        return;
    }
    if (!l->tls_on) {
        hand_outbound(l);
    }
}

/* --- struct raft_uv_transport ------------------------------------------ */

static struct transport *impl_of(struct raft_uv_transport *rt)
{
    return rt->impl;
}

static int t_init(struct raft_uv_transport *rt, raft_id id, const char *address)
{
    struct transport *t = impl_of(rt);

    if (strlen(address) >= ADDR_MAX) {
        snprintf(rt->errmsg, sizeof rt->errmsg, "address too long");
        return RAFT_INVALID;
    }
    t->id = id;
    snprintf(t->address, sizeof t->address, "%s", address);
    return 0;
}

static void on_listener_closed(uv_handle_t *h)
{
    struct transport *t = h->data;

    ONCE_ASSERT(t->listening, "the listener closes once");
    t->listening = false;
    transport_maybe_closed(t);
}

static int t_listen(struct raft_uv_transport *rt, raft_uv_accept_cb cb)
{
    struct transport *t = impl_of(rt);
    struct sockaddr_in sa;
    char ip[INET_ADDRSTRLEN];
    const char *at = t->cfg.listen != NULL ? t->cfg.listen : t->address;
    int rv;

    if (strlen(at) >= ADDR_MAX || !parse_addr(at, &sa, ip)) {
        snprintf(rt->errmsg, sizeof rt->errmsg,
                 "%.200s: not an IPv4 IP:PORT address", at);
        return RAFT_INVALID;
    }
    ONCE_ASSERT(!t->listening && !t->closing,
                "raft listens once, before close");
    t->accept_cb = cb;
    (void)uv_tcp_init(t->loop, &t->listener);
    t->listener.data = t;
    t->listening = true;
    rv = uv_tcp_bind(&t->listener, (const struct sockaddr *)&sa, 0);
    if (rv == 0) {
        rv = uv_listen((uv_stream_t *)&t->listener, 128, on_accept);
    }
    if (rv != 0) {
        snprintf(rt->errmsg, sizeof rt->errmsg, "listen on %.120s: %.100s", at,
                 uv_strerror(rv));
        uv_close((uv_handle_t *)&t->listener, on_listener_closed);
        return RAFT_IOERR;
    }
    return 0;
}

static int t_connect(struct raft_uv_transport *rt,
                     struct raft_uv_connect *req,
                     raft_id id,
                     const char *address,
                     raft_uv_connect_cb cb)
{
    struct transport *t = impl_of(rt);
    struct sockaddr_in sa;
    char ip[INET_ADDRSTRLEN];
    struct link *l;

    req->cb = cb;
    if (strlen(address) >= ADDR_MAX || !parse_addr(address, &sa, ip)) {
        snprintf(rt->errmsg, sizeof rt->errmsg,
                 "%.200s: not an IPv4 IP:PORT address", address);
        return RAFT_NOCONNECTION;
    }
    l = link_new(t, false);
    if (l == NULL) {
        return RAFT_NOMEM; /* UNTESTED: malloc */
    }
    l->req = req;
    l->peer_id = id;
    snprintf(l->peer, sizeof l->peer, "%s", address);
    l->creq.data = l;
    if (uv_tcp_connect(&l->creq, l->tcp, (const struct sockaddr *)&sa,
                       on_connected) != 0) {
        l->req = NULL; /* failed here: raft hears it from the return */
        link_close(l);
        return RAFT_NOCONNECTION;
    }
    link_bound(l); /* the SYN's retries too */
    return 0;
}

static void t_close(struct raft_uv_transport *rt, raft_uv_transport_close_cb cb)
{
    struct transport *t = impl_of(rt);

    ONCE_ASSERT(!t->closing, "raft closes its transport once");
    t->closing = true;
    t->close_cb = cb;
    if (t->listening && !uv_is_closing((uv_handle_t *)&t->listener)) {
        uv_close((uv_handle_t *)&t->listener, on_listener_closed);
    }
    while (t->links != NULL) {
        link_close(t->links);
    }
    transport_maybe_closed(t);
}

int transport_init(struct raft_uv_transport *rt,
                   uv_loop_t *loop,
                   const struct transport_config *cfg)
{
    struct transport *t = calloc(1, sizeof *t);

    if (t == NULL) {
        return RAFT_NOMEM; /* UNTESTED: malloc */
    }
    t->rt = rt;
    t->loop = loop;
    t->cfg = *cfg;
    memset(rt, 0, sizeof *rt);
    rt->impl = t;
    rt->init = t_init;
    rt->listen = t_listen;
    rt->connect = t_connect;
    rt->close = t_close;
    return 0;
}

void transport_free(struct raft_uv_transport *rt)
{
    const struct transport *t = rt->impl;

    ONCE_ASSERT(t == NULL || (t->n_links == 0 && !t->listening),
                "freed with no link or listener left open");
    free(rt->impl);
    rt->impl = NULL;
}

void transport_stats(const struct raft_uv_transport *rt,
                     struct transport_stats *st)
{
    const struct transport *t = rt->impl;

    *st = t->st;
}

void transport_recheck(struct raft_uv_transport *rt)
{
    struct transport *t = rt->impl;
    struct link *l = t->links, *next;

    /* link_bind may close (unlink) @l: take its successor first. */
    for (; l != NULL; l = next) {
        next = l->next;
        if (l->handed) {
            (void)link_bind(l, l->inbound ? le64_of(l->hs + 8) : l->peer_id,
                            l->inbound ? l->addr : l->peer);
        }
    }
}
