/* common/addr.c: IPv4 "IP:PORT" (addr.h). */
#include "common/addr.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include "common/text.h"

#define PORT_DIGITS_MAX 5 /* "65535" */

/* The port text @p by @rule into *@out (not range-checked here). */
static bool port_parse(const char *p, enum addr_port rule, unsigned long *out)
{
    switch (rule) {
        case ADDR_PORT_STRTOUL: {
            char *end;

            errno = 0;
            *out = strtoul(p, &end, 10);
            return *p != '\0' && *end == '\0' && errno == 0;
        }
        case ADDR_PORT_ZEROS: {
            uint64_t v;

            if (!text_parse_u64(p, 65535, &v)) {
                return false;
            }
            *out = (unsigned long)v;
            return true;
        }
        case ADDR_PORT_DIGITS:
        case ADDR_PORT_CANONICAL:
            break;
    }
    if (*p == '\0' || strlen(p) > PORT_DIGITS_MAX ||
        (rule == ADDR_PORT_CANONICAL && *p == '0')) {
        return false;
    }
    *out = 0;
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return false;
        }
        *out = *out * 10 + (unsigned long)(*p - '0');
    }
    return true;
}

bool addr_parse_ipv4(const char *s,
                     enum addr_port rule,
                     struct sockaddr_in *out)
{
    char ip[ADDR_IP_MAX + 1];
    const char *colon;
    struct in_addr a;
    unsigned long port;
    size_t n;

    if (s == NULL || (colon = strrchr(s, ':')) == NULL) {
        return false;
    }
    n = (size_t)(colon - s);
    if (n == 0 || n > ADDR_IP_MAX) {
        return false;
    }
    memcpy(ip, s, n);
    ip[n] = '\0';
    if (inet_pton(AF_INET, ip, &a) != 1 ||
        !port_parse(colon + 1, rule, &port) || port == 0 || port > 65535) {
        return false;
    }
    if (out != NULL) {
        memset(out, 0, sizeof *out);
        out->sin_family = AF_INET;
        out->sin_addr = a;
        out->sin_port = htons((uint16_t)port);
    }
    return true;
}
