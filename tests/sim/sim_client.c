/* tests/sim/sim_client.c: the client workload of a simulated run and the
 * history it writes (sim.h).
 *
 * Keys n0..n3 take NONCE claims with short ttls (so records expire during
 * a run and are claimed again), keys i0..i3 IDEMPOTENT claims with short
 * leases; an owner completes or releases its record, or abandons it (the
 * next claimant takes over after the lease), and now and then an owner
 * that was taken over tries to complete with its old token. A call whose
 * answer was lost (applied unknown) or refused is retried with the same
 * request id. Every call goes to the history in the format
 * jepsen/local/check reads (jepsen/README.md, "History format"); a few
 * rules are also checked here at once, cheaply (C1, C2 below). */
#include <inttypes.h>
#include <string.h>

#include "fsm_helpers.h"
#include "sim.h"

/* --- history (EDN) ---------------------------------------------------------
 */

static void hex_rid(char out[2 * FSM_REQUEST_ID_LEN + 1], uint64_t rid)
{
    uint8_t b[FSM_REQUEST_ID_LEN];

    fh_rid(b, rid);
    for (size_t k = 0; k < FSM_REQUEST_ID_LEN; k++) {
        snprintf(out + 2 * k, 3, "%02x", b[k]);
    }
}

static void hex_id(char out[2 * FSM_REQUEST_ID_LEN + 1], const uint8_t *b)
{
    for (size_t k = 0; k < FSM_REQUEST_ID_LEN; k++) {
        snprintf(out + 2 * k, 3, "%02x", b[k]);
    }
}

static void b64(char *out, const uint8_t *in, size_t n)
{
    static const char t[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;

    for (size_t k = 0; k < n; k += 3) {
        uint32_t v = (uint32_t)in[k] << 16;
        if (k + 1 < n) {
            v |= (uint32_t)in[k + 1] << 8;
        }
        if (k + 2 < n) {
            v |= in[k + 2];
        }
        out[o++] = t[(v >> 18) & 63];
        out[o++] = t[(v >> 12) & 63];
        out[o++] = k + 1 < n ? t[(v >> 6) & 63] : '=';
        out[o++] = k + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
}

static const char *f_name(enum sim_f f)
{
    switch (f) {
        case SF_COMPLETE:
            return "complete";
        case SF_RELEASE:
            return "release";
        case SF_LOOKUP:
            return "lookup";
        default:
            return "claim";
    }
}

static void tok_text(char *out, size_t n, struct fsm_token t)
{
    snprintf(out, n, "%" PRIu32 ":%" PRIu64 ":%" PRIu32, t.group_id, t.index,
             t.slot);
}

void edn_header(void)
{
    if (edn == NULL) {
        return;
    }
    fprintf(edn,
            "{:type :info, :process :nemesis, :f :time-settings, :value "
            "{:max-window-ms 300000 :max-skew-ms %u :workload \"sim\"}}\n",
            SIM_MAX_SKEW_MS);
}

void edn_footer(void)
{
}

static void edn_invoke(const struct sop *o)
{
    char rid[2 * FSM_REQUEST_ID_LEN + 1], tok[64], res[128];

    if (edn == NULL) {
        return;
    }
    hex_rid(rid, o->rid);
    fprintf(edn,
            "{:type :invoke, :process %zu, :f :%s, :time %" PRIu64
            ", :value {:scope \"%s\" :key \"%s\" :request-id \"%s\" :node "
            "\"c%u\"",
            o->n_in_history, f_name(o->f), o->t_invoke * 1000000u, CL_SCOPE,
            key_names[o->key], rid, o->server + 1);
    if (o->f == SF_CLAIM) {
        fprintf(edn, " :kind \"%s\" :ttl-ms %" PRIu64,
                o->key < SIM_N_NONCE ? "NONCE" : "IDEMPOTENT", o->ttl_ms);
        if (o->key >= SIM_N_NONCE) {
            fprintf(edn, " :lease-ms %" PRIu64, o->lease_ms);
        }
    } else {
        tok_text(tok, sizeof tok, o->token);
        fprintf(edn, " :owner-token \"%s\"", tok);
        if (o->f == SF_COMPLETE) {
            uint8_t v[8];
            memcpy(v, &o->result_val, sizeof v);
            b64(res, v, sizeof v);
            fprintf(edn, " :result-b64 \"%s\"", res);
        }
    }
    if (o->probe) {
        fprintf(edn, " :final true");
    }
    fprintf(edn, "}}\n");
}

static void edn_complete(const struct sop *o)
{
    const struct fsm_result *r = &o->res;
    char id[2 * FSM_REQUEST_ID_LEN + 1], tok[64], res[128];

    if (edn == NULL) {
        return;
    }
    fprintf(edn,
            "{:type :%s, :process %zu, :f :%s, :time %" PRIu64 ", :value {",
            o->type == ST_OK     ? "ok"
            : o->type == ST_FAIL ? "fail"
                                 : "info",
            o->n_in_history, f_name(o->f), o->t_done * 1000000u);
    if (o->type != ST_OK) {
        fprintf(edn, ":error \"%s\" :applied \"%s\"}}\n",
                replica_strerror(o->status),
                o->type == ST_FAIL ? "false" : "unknown");
        return;
    }
    fprintf(edn, ":outcome \"%s\" :retry %s :log-time-ms %" PRIu64,
            fsm_outcome_name(r->outcome), r->retry ? "true" : "false",
            r->log_time_ms);
    if (r->has_record) {
        hex_id(id, r->first_request_id);
        fprintf(edn,
                " :first-request-id \"%s\" :first-index %" PRIu64
                " :first-time-ms %" PRIu64 " :expires-ms %" PRIu64,
                id, r->first_index, r->first_time_ms, r->expires_ms);
        if (r->kind == FSM_KIND_IDEMPOTENT) {
            fprintf(edn,
                    " :owner-attempt %" PRIu32 " :lease-expires-ms %" PRIu64,
                    r->owner_attempt, r->lease_expires_ms);
        }
    }
    if (r->has_owner_token) {
        tok_text(tok, sizeof tok, r->owner_token);
        fprintf(edn, " :owner-token \"%s\"", tok);
    }
    if (r->retry_after_ms != 0) {
        fprintf(edn, " :retry-after-ms %" PRIu64, r->retry_after_ms);
    }
    if (o->has_got_result) {
        b64(res, o->got_result, o->got_result_len);
        fprintf(edn, " :result-b64 \"%s\"", res);
    }
    fprintf(edn, "}}\n");
}

/* --- calls -------------------------------------------------------------------
 */

static void sim_cb(struct replica_req *req,
                   int status,
                   const struct fsm_result *res)
{
    struct sop *o = req->data;

    o->status = status;
    o->t_done = raft_fixture_time(&C.f);
    if (status == 0 && res != NULL) {
        o->res = *res;
        o->res.reason = NULL;
        o->res.stored_error = NULL;
        o->res.n_attempt_list = 0;
        if (res->result != NULL) {
            size_t n = res->result_len < sizeof o->got_result
                           ? res->result_len
                           : sizeof o->got_result;
            memcpy(o->got_result, res->result, n);
            o->got_result_len = n;
            o->has_got_result = true;
        }
        o->res.result = NULL;
        o->type = ST_OK;
    } else if (status == REPLICA_E_UNKNOWN) {
        o->type = ST_INFO;
    } else {
        o->type = ST_FAIL;
    }
}

/* Submit @o (filled by the caller) at its server. */
static struct sop *submit(struct sop *o)
{
    struct fsm_claim cl;
    struct fsm_cmd cmd;
    uint8_t v[8];
    int rv;

    scan_completions(); /* earlier completions first in the history */
    o->n_in_history = (size_t)(o - ops);
    o->req.data = o;
    o->t_invoke = raft_fixture_time(&C.f);
    o->retries_left = o->retries_left == 0 ? 3 : o->retries_left;
    memcpy(v, &o->result_val, sizeof v);
    switch (o->f) {
        case SF_CLAIM:
            fh_claim(
                &cl,
                o->key < SIM_N_NONCE ? FSM_KIND_NONCE : FSM_KIND_IDEMPOTENT,
                CL_SCOPE, key_names[o->key], o->rid);
            cl.ttl_ms = o->ttl_ms;
            cl.lease_ms = o->lease_ms;
            cmd = fh_cmd_claim(&cl);
            break;
        case SF_COMPLETE:
            cmd = fh_cmd_complete(CL_SCOPE, key_names[o->key], o->token, v,
                                  sizeof v);
            break;
        default:
            cmd = fh_cmd_release(CL_SCOPE, key_names[o->key], o->token, false,
                                 NULL, 0);
            break;
    }
    st->ops++;
    trace_mix(((uint64_t)o->f << 56) ^ ((uint64_t)o->key << 48) ^ o->rid ^
              ((uint64_t)o->server << 40));
    edn_invoke(o);
    rv = replica_submit(&C.s[o->server].rep, &o->req, &cmd, sim_cb);
    if (rv != 0) {
        o->status = rv;
        o->type = ST_FAIL;
        o->t_done = o->t_invoke;
        if (strcmp(replica_status_applied(rv), "false") != 0) {
            sim_fail("replica_submit returned %d, not a not-applied code", rv);
        }
    }
    vlog("invoke #%zu %s %s rid=%llu at %u -> %d", (size_t)(o - ops),
         f_name(o->f), key_names[o->key], (unsigned long long)o->rid,
         o->server + 1, rv);
    return o;
}

static struct sop *new_op(void)
{
    struct sop *o;

    if (n_ops >= SIM_OPS_MAX) {
        return NULL;
    }
    o = &ops[n_ops++];
    memset(o, 0, sizeof *o);
    return o;
}

struct sop *sim_invoke_claim(unsigned server,
                             unsigned key,
                             uint64_t rid,
                             bool retry,
                             bool probe,
                             uint64_t ttl_ms,
                             uint64_t lease_ms)
{
    struct sop *o = new_op();

    if (o == NULL) {
        return NULL;
    }
    o->f = SF_CLAIM;
    o->server = server;
    o->key = key;
    o->rid = rid;
    o->retry_of_rid = retry;
    o->probe = probe;
    o->ttl_ms = ttl_ms;
    o->lease_ms = lease_ms;
    return submit(o);
}

static int pick_server(void)
{
    int l = ready_leader();
    return (l >= 0 && chance(70)) ? l : random_live_server();
}

void client_event(void)
{
    int s = pick_server();
    unsigned key;

    if (s < 0) {
        return;
    }
    if (chance(50)) {
        /* n0 is hot: a claim with a ttl of a few batches, so that some
         * batch lands on the millisecond before one of its expiries. */
        (void)sim_invoke_claim((unsigned)s, 0, ++next_rid, false, false,
                               rnd_range(5, 60), 0);
    }
    if (chance(55)) {
        unsigned p = rnd_below(100);
        uint64_t ttl = p < 50   ? rnd_range(5, 80)
                       : p < 80 ? rnd_range(80, 400)
                                : rnd_range(1000, 8000);

        /* n0 is hot: claimed often with short ttls, so batches land on
         * every millisecond around its records' expiries. */
        key = chance(50) ? 0 : rnd_below(SIM_N_NONCE);
        (void)sim_invoke_claim((unsigned)s, key, ++next_rid, false, false, ttl,
                               0);
    } else {
        /* One draw per statement: the order in which a call's arguments
         * are evaluated is unspecified (gcc and clang differ), and a seed
         * must replay alike in every build. */
        uint64_t ttl = rnd_range(1500, 6000);
        uint64_t lease = rnd_range(40, 800);

        key = SIM_N_NONCE + rnd_below(SIM_N_IDEM);
        (void)sim_invoke_claim((unsigned)s, key, ++next_rid, false, false, ttl,
                               lease);
    }
}

/* An owner's complete or release (or a stale owner's try). */
static void owner_call(struct sop *owner, enum sim_f f, uint64_t rid)
{
    int s = pick_server();
    struct sop *o;

    if (s < 0 || (o = new_op()) == NULL) {
        return;
    }
    o->f = f;
    o->server = (unsigned)s;
    o->key = owner->key;
    o->rid = rid;
    o->token = owner->res.owner_token;
    o->result_val = rid * 0x9e3779b97f4a7c15ull;
    if (f == SF_COMPLETE) {
        st->completes++;
    }
    (void)submit(o);
}

/* Retries of calls whose answer was lost or refused, and the owners'
 * follow-ups. */
void followup_events(void)
{
    uint64_t now = raft_fixture_time(&C.f);
    size_t n = n_ops;

    for (size_t k = 0; k < n; k++) {
        struct sop *h = &ops[k];

        if (h->retry_at != 0 && h->retry_at <= now) {
            int s = pick_server();
            struct sop *o;

            h->retry_at = 0;
            if (s < 0 || (o = new_op()) == NULL) {
                continue;
            }
            *o = *h;
            memset(&o->req, 0, sizeof o->req);
            memset(&o->res, 0, sizeof o->res);
            o->server = (unsigned)s;
            o->retry_of_rid = true;
            o->type = ST_PENDING;
            o->status = 0;
            o->seen_done = false;
            o->has_got_result = false;
            o->follow_at = 0;
            o->retries_left = h->retries_left - 1;
            (void)submit(o);
        }
        if (h->follow_at != 0 && h->follow_at <= now) {
            h->follow_at = 0;
            owner_call(h, h->follow_f, h->follow_rid);
        }
    }
}

/* --- completions and the checks made at once ------------------------------
 * C1 (NONCE): a claim of a key with another request id, invoked after an
 *    ACCEPTED of it completed, is not ACCEPTED at a log time before that
 *    record's expires_ms.
 * C2 (IDEMPOTENT): a complete that carries an owner token older than an
 *    owner attempt acknowledged before it was invoked is not COMPLETED
 *    (unless it is the retry of a complete that was). */

struct key_seen
{
    bool have;
    uint64_t rid, expires, done_at;
    uint32_t attempt;
    uint64_t token_index;
};
static struct key_seen seen[SIM_N_KEYS];

void sim_client_reset(void)
{
    memset(seen, 0, sizeof seen);
}

static void check_answer(const struct sop *o)
{
    const struct fsm_result *r = &o->res;
    struct key_seen *k = &seen[o->key];

    if (o->f == SF_CLAIM && r->outcome == FSM_ACCEPTED && !r->retry) {
        if (quick_checks && o->key < SIM_N_NONCE && k->have &&
            k->rid != o->rid && o->t_invoke > k->done_at &&
            r->log_time_ms < k->expires) {
            sim_fail(
                "C1: key %s ACCEPTED again (rid %llu at log time %llu) "
                "while the record of rid %llu lives until %llu",
                key_names[o->key], (unsigned long long)o->rid,
                (unsigned long long)r->log_time_ms, (unsigned long long)k->rid,
                (unsigned long long)k->expires);
        }
        if (o->key >= SIM_N_NONCE && r->owner_attempt > 1) {
            st->takeovers++;
        }
    }
    if (o->f == SF_CLAIM && r->outcome == FSM_ACCEPTED && r->has_record &&
        (!k->have || o->t_done >= k->done_at)) {
        k->have = true;
        k->rid = o->rid;
        k->expires = r->expires_ms;
        k->done_at = o->t_done;
        k->attempt = r->owner_attempt;
        k->token_index = r->owner_token.index;
    }
    if (quick_checks && o->f == SF_COMPLETE && r->outcome == FSM_COMPLETED &&
        !r->retry && k->have && k->done_at < o->t_invoke &&
        o->token.index < k->token_index) {
        sim_fail(
            "C2: key %s COMPLETED with the stale owner token %llu "
            "after owner attempt %u (token %llu) was acknowledged",
            key_names[o->key], (unsigned long long)o->token.index, k->attempt,
            (unsigned long long)k->token_index);
    }
    switch (r->outcome) {
        case FSM_ACCEPTED:
        case FSM_REPLAYED:
        case FSM_IN_PROGRESS:
        case FSM_DUPLICATE:
        case FSM_COMPLETED:
        case FSM_RELEASED:
        case FSM_NOT_OWNER:
        case FSM_NOT_FOUND:
            break;
        default:
            sim_fail("unexpected outcome %s for a %s of %s",
                     fsm_outcome_name(r->outcome), f_name(o->f),
                     key_names[o->key]);
    }
}

void scan_completions(void)
{
    for (size_t k = 0; k < n_ops; k++) {
        struct sop *o = &ops[k];

        if (o->seen_done || o->type == ST_PENDING) {
            continue;
        }
        o->seen_done = true;
        edn_complete(o);
        trace_mix(((uint64_t)k << 32) ^ (uint64_t)o->type ^
                  ((uint64_t)o->res.outcome << 8) ^ o->res.log_time_ms ^
                  o->res.first_index);
        if (o->type == ST_OK) {
            st->ok++;
            check_answer(o);
            if (o->f == SF_CLAIM && o->res.outcome == FSM_ACCEPTED) {
                st->accepted++;
            }
        } else if (o->type == ST_FAIL) {
            st->fail++;
        } else {
            st->info++;
        }
        if (o->probe) {
            continue;
        }
        if ((o->type == ST_INFO && chance(70)) ||
            (o->type == ST_FAIL && chance(25))) {
            if (o->retries_left > 1) {
                o->retry_at = raft_fixture_time(&C.f) + rnd_range(20, 1500);
            }
        }
        /* An owner's next move: complete, release, or walk away (the
         * lease runs out and the next claimant takes over). */
        if (o->type == ST_OK && o->f == SF_CLAIM &&
            o->res.outcome == FSM_ACCEPTED && o->key >= SIM_N_NONCE &&
            o->res.has_owner_token) {
            unsigned p = rnd_below(100);
            if (p < 60) {
                o->follow_f = SF_COMPLETE;
            } else if (p < 80) {
                o->follow_f = SF_RELEASE;
            }
            if (p < 80) {
                o->follow_at = raft_fixture_time(&C.f) +
                               rnd_range(0, (unsigned)o->lease_ms * 3 / 2);
                o->follow_rid = ++next_rid;
            }
            /* A takeover: the owner before may still try to finish. */
            if (o->res.owner_attempt > 1 && chance(50)) {
                for (size_t j = k; j-- > 0;) {
                    struct sop *prev = &ops[j];
                    if (prev->key == o->key && prev->f == SF_CLAIM &&
                        prev->type == ST_OK &&
                        prev->res.outcome == FSM_ACCEPTED &&
                        prev->res.has_owner_token &&
                        prev->res.owner_attempt < o->res.owner_attempt) {
                        st->stale_owner_tries++;
                        prev->follow_f = SF_COMPLETE;
                        prev->follow_rid = ++next_rid;
                        prev->follow_at =
                            raft_fixture_time(&C.f) + rnd_range(1, 300);
                        break;
                    }
                }
            }
        }
    }
}
