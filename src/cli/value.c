/* cli/value.c: the value syntaxes of oncectl that are not the request's
 * fields (cli.h): owner tokens, base64, IPv4 addresses and the --cluster
 * list. Pure functions of their arguments; args.c's field parsers and
 * json.c's answers use them. */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <openssl/evp.h>

#include "common/addr.h"
#include "common/err.h"
#include "common/text.h"

bool cli_parse_token(const char *s, struct once_token *t)
{
    char part[3][24];
    const char *p = s;
    uint64_t v[3];

    if (s == NULL) {
        return false;
    }
    for (int i = 0; i < 3; i++) {
        size_t n = 0;

        while (p[n] != '\0' && p[n] != ':') {
            n++;
        }
        if (n == 0 || n >= sizeof part[i] || (i < 2 && p[n] != ':') ||
            (i == 2 && p[n] != '\0')) {
            return false;
        }
        memcpy(part[i], p, n);
        part[i][n] = '\0';
        p += n + (i < 2 ? 1 : 0);
    }
    if (!text_parse_u64(part[0], UINT32_MAX, &v[0]) ||
        !text_parse_u64(part[1], UINT64_MAX, &v[1]) ||
        !text_parse_u64(part[2], UINT32_MAX, &v[2])) {
        return false;
    }
    t->group_id = (uint32_t)v[0];
    t->index = v[1];
    t->slot = (uint32_t)v[2];
    return true;
}

char *cli_format_token(const struct once_token *t, char buf[CLI_TOKEN_TEXT_MAX])
{
    snprintf(buf, CLI_TOKEN_TEXT_MAX, "%lu:%lu:%lu", (unsigned long)t->group_id,
             (unsigned long)t->index, (unsigned long)t->slot);
    return buf;
}

static bool b64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '+' || c == '/';
}

bool cli_b64_decode(const char *s,
                    size_t len,
                    uint8_t *out,
                    size_t cap,
                    size_t *out_len)
{
    size_t pad = 0;
    size_t need;
    unsigned char *tmp;
    int n;

    /* EVP_DecodeBlock skips leading blanks, ignores trailing ones, and
     * counts padding as zero bytes: check the strict form first, then
     * subtract the padding from its length. */
    if (len % 4 != 0) {
        return false;
    }
    if (len == 0) {
        *out_len = 0;
        return true;
    }
    if (s[len - 1] == '=') {
        pad = s[len - 2] == '=' ? 2 : 1;
    }
    for (size_t i = 0; i < len - pad; i++) {
        if (!b64_char(s[i])) {
            return false;
        }
    }
    need = len / 4 * 3 - pad;
    if (need > cap || len > (size_t)INT32_MAX) {
        return false;
    }
    tmp = malloc(len / 4 * 3);
    if (tmp == NULL) {
        return false;
    }
    n = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)len);
    if (n < 0 || (size_t)n != len / 4 * 3) {
        free(tmp);
        return false;
    }
    memcpy(out, tmp, need);
    free(tmp);
    *out_len = need;
    return true;
}

char *cli_b64_encode(const uint8_t *in, size_t len)
{
    size_t outlen = 4 * ((len + 2) / 3) + 1;
    char *out;

    if (len > (size_t)INT32_MAX / 2) {
        return NULL;
    }
    out = malloc(outlen);
    if (out == NULL) {
        return NULL;
    }
    EVP_EncodeBlock((unsigned char *)out, in, (int)len);
    return out;
}

bool cli_check_addr(const char *s)
{
    /* IPv4 literals only, as onced and libraft 0.15 take them: a name
     * would be refused later with a vaguer message. */
    return s != NULL && strlen(s) <= ONCE_ADDR_MAX &&
           addr_parse_ipv4(s, ADDR_PORT_ZEROS, NULL);
}

int cli_parse_cluster(const char *s,
                      char *buf,
                      size_t buflen,
                      const char **addrs,
                      char *err)
{
    size_t n = strlen(s);
    int count = 0;
    char *p;

    if (n == 0 || n >= buflen) {
        err_printf(err, "--cluster: %s", n == 0 ? "empty" : "too long");
        return -EINVAL;
    }
    memcpy(buf, s, n + 1);
    p = buf;
    for (;;) {
        char *comma = strchr(p, ',');

        if (comma != NULL) {
            *comma = '\0';
        }
        if (count == ONCE_ADDRS_MAX) {
            err_printf(err, "--cluster: more than %d addresses",
                       ONCE_ADDRS_MAX);
            return -EINVAL;
        }
        if (!cli_check_addr(p)) {
            err_printf(
                err, "--cluster: bad address \"%.64s\" (want an IPv4 IP:PORT)",
                p);
            return -EINVAL;
        }
        addrs[count++] = p;
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    return count;
}
