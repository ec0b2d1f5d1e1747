/* common/err.c: names and texts of the error codes, message helpers. */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct err_code
{
    int value;
    const char *name;
    const char *text;
};

#define ERR_ROW(name, value, text) {(value), #name, (text)},

static const struct err_code codes[] = {ERR_CODES(ERR_ROW)};

static const struct
{
    int base;
    const char *module;
} ranges[] = {
    {ERR_FSM_BASE, "fsm"},         {ERR_ENTRY_BASE, "entry"},
    {ERR_REPLICA_BASE, "replica"}, {ERR_IDENTITY_BASE, "identity"},
    {ERR_RPC_BASE, "rpc"},         {ERR_TLS_BASE, "tls"},
    {ERR_HTTP_BASE, "http"},       {ERR_VERIFY_BASE, "verify"},
    {ERR_INGRESS_BASE, "ingress"}, {ERR_ACCESS_BASE, "access"},
};

static const struct err_code *find(int code)
{
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        if (codes[i].value == code) {
            return &codes[i];
        }
    }
    return NULL;
}

const char *err_name(int code)
{
    const struct err_code *c = find(code);

    return c != NULL ? c->name : NULL;
}

const char *err_module(int code)
{
    if (code > 0) {
        return "raft";
    }
    if (code < 0 && code > -1000) {
        return "errno";
    }
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        if (code < ranges[i].base && code > ranges[i].base - 100) {
            return ranges[i].module;
        }
    }
    return NULL;
}

const char *err_str(int code)
{
    const struct err_code *c;

    if (code == 0) {
        return "success";
    }
    if (code > 0) {
        return "libraft error";
    }
    if (code > -1000) {
        return strerror(-code);
    }
    c = find(code);
    return c != NULL ? c->text : "unknown error";
}

void err_printf(char *msg, const char *fmt, ...)
{
    va_list ap;

    if (msg == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, ERR_MSG_SIZE, fmt, ap);
    va_end(ap);
}

void err_wrapf(char *msg, const char *fmt, ...)
{
    char prefix[ERR_MSG_SIZE];
    char old[ERR_MSG_SIZE];
    va_list ap;

    if (msg == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, msg, ERR_MSG_SIZE);
    old[ERR_MSG_SIZE - 1] = '\0';
    /* Cut on purpose: the result is at most ERR_MSG_SIZE - 1 characters. */
    size_t n = strlen(prefix);
    memcpy(msg, prefix, n);
    if (n + 2 < ERR_MSG_SIZE) {
        memcpy(msg + n, ": ", 2);
        n += 2;
        size_t rest = strlen(old);
        if (rest > ERR_MSG_SIZE - 1 - n) {
            rest = ERR_MSG_SIZE - 1 - n;
        }
        memcpy(msg + n, old, rest);
        n += rest;
    }
    msg[n] = '\0';
}
