/* bindshim.c: LD_PRELOAD shim for jepsen/local/run (compiled by it).
 *
 * On loopback every outgoing connection gets the source 127.0.0.1, so an
 * iptables rule cannot tell node 1's Raft traffic from node 2's. With
 * ONCE_JEPSEN_BIND=127.0.1.N in its environment, a node's unbound AF_INET
 * sockets are bound to that address (port 0) just before connect(), so
 * partitions can be keyed by source and destination 127.0.1.x addresses.
 * Nothing else changes: a failed bind is ignored and connect() proceeds. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int (*real_connect)(int, const struct sockaddr *, socklen_t);
static struct in_addr bind_addr;
static int have_addr;

__attribute__((constructor)) static void shim_init(void)
{
    const char *b = getenv("ONCE_JEPSEN_BIND");

    real_connect = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(
        RTLD_NEXT, "connect");
    if (b != NULL && inet_pton(AF_INET, b, &bind_addr) == 1)
        have_addr = 1;
}

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    if (real_connect == NULL)
        shim_init();
    if (have_addr && sa != NULL && sa->sa_family == AF_INET) {
        struct sockaddr_in cur;
        socklen_t cl = sizeof cur;

        memset(&cur, 0, sizeof cur);
        if (getsockname(fd, (struct sockaddr *)&cur, &cl) == 0 &&
            cur.sin_family == AF_INET && cur.sin_port == 0 &&
            cur.sin_addr.s_addr == htonl(INADDR_ANY)) {
            struct sockaddr_in me;
            int saved = errno;

            memset(&me, 0, sizeof me);
            me.sin_family = AF_INET;
            me.sin_addr = bind_addr;
            (void)bind(fd, (struct sockaddr *)&me, sizeof me);
            errno = saved;
        }
    }
    return real_connect(fd, sa, len);
}
