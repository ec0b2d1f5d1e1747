/* cli/help.c: oncectl's help texts (cli.h, docs/oncectl.md).
 *
 * Data only: the overview and one text per command, looked up by command.
 * Each command's text names every positional and option the parser takes
 * for it (args.c's tables; tests/unit/cli/test_cli.c checks every field of
 * every command appears here), its success outcome and its exit codes, so
 * the help cannot omit what the parser takes. */
#include "cli/cli.h"

static const char help_claim[] =
    "usage: oncectl claim SCOPE KEY [--request-id HEX32] [--execution-id ID]\n"
    "         [--ttl DUR | --ts UNIX_MS --window DUR]\n"
    "         [--max-uses N]\n"
    "         [--idempotent [--payload-hash HEX] [--lease DUR] [--sliding]]\n"
    "\n"
    "Claim the first use of (SCOPE, KEY): SCOPE is 1..128 bytes, KEY 1..256.\n"
    "A NONCE claim (the default) answers \"has this been seen?\"; with\n"
    "--idempotent the first claim takes ownership of business work (PENDING,\n"
    "an owner token and a lease) until complete or release.\n"
    "\n"
    "  --request-id HEX32    32 hex digits; default: fresh random. Give the "
    "id\n"
    "                        of an earlier call only to retry THAT call\n"
    "                        (after exit 4): it is then ACCEPTED again with\n"
    "                        retry true, if it was accepted.\n"
    "  --execution-id ID     0..128 bytes kept as evidence with each attempt\n"
    "                        (a pod name, a job id)\n"
    "  --ttl DUR             keep the record this long (default 24h when\n"
    "                        neither --ttl nor --ts is given)\n"
    "  --ts UNIX_MS          the request's signed timestamp (unix ms); needs\n"
    "                        --window, excludes --ttl: accepted only if\n"
    "                        now - window <= ts <= now + max_skew\n"
    "  --window DUR          the signature window, with --ts\n"
    "  --idempotent          an IDEMPOTENT record (owner, lease, result)\n"
    "  --payload-hash HEX    0..64 bytes in hex, with --idempotent: a claim\n"
    "                        of the same key with another hash is CONFLICT\n"
    "  --lease DUR           the owner's lease, with --idempotent (0s or\n"
    "                        absent: the cluster's default)\n"
    "  --max-uses N          a NONCE usable N times (1..64; log schema 3):\n"
    "                        ACCEPTED with uses and uses_left until N\n"
    "                        request ids took one, then REPLAYED; the first\n"
    "                        claim fixes N, another N is CONFLICT\n"
    "  --sliding             with --idempotent and a ttl (log schema 3):\n"
    "                        each DUPLICATE, IN_PROGRESS or FAILED answer\n"
    "                        keeps the record ttl longer (up to max_ttl from\n"
    "                        the first claim)\n"
    "\n"
    "Outcomes: ACCEPTED (exit 0), REPLAYED, DUPLICATE (with result_b64),\n"
    "IN_PROGRESS (with retry_after_ms), CONFLICT, STALE, FUTURE, FAILED\n"
    "(with stored_error): exit 1. A refusal of a bound by the cluster\n"
    "(INVALID_ARGUMENT): exit 2; a full table (RESOURCE_EXHAUSTED): exit 3.\n"
    "Fields: outcome, retry, log_time_ms (the cluster's log time the answer\n"
    "was decided at: STALE is ts < log_time_ms - window), request_id,\n"
    "first_request_id, first_index, first_time_ms, attempts_total,\n"
    "owner_token (GROUP:INDEX:SLOT, only to the owner), result_b64,\n"
    "stored_error, retry_after_ms, reason, kind, state, expires_ms,\n"
    "lease_expires_ms, owner_attempt, max_uses, uses, uses_left (NONCE),\n"
    "sliding, as they apply. Before `oncectl schema upgrade` to 3,\n"
    "--max-uses above 1 and --sliding are FAILED_PRECONDITION (exit 1).\n";

static const char help_complete[] =
    "usage: oncectl complete SCOPE KEY --owner-token TOKEN\n"
    "         [--result TEXT | --result-b64 B64] [--request-id HEX32]\n"
    "\n"
    "The owner of a PENDING IDEMPOTENT record stores its result; every later\n"
    "claim of the key gets DUPLICATE with this result.\n"
    "\n"
    "  --owner-token TOKEN   GROUP:INDEX:SLOT in decimal, as the ACCEPTED\n"
    "                        claim printed it (required)\n"
    "  --result TEXT         the result bytes, 0..65536 (default: empty)\n"
    "  --result-b64 B64      the result as standard base64 with padding\n"
    "  --request-id HEX32    32 hex digits; default: fresh random\n"
    "\n"
    "Outcomes: COMPLETED (exit 0; retry true if already completed with this\n"
    "token); NOT_OWNER (the token was fenced by a takeover), NOT_FOUND,\n"
    "CONFLICT (a NONCE record, or RELEASED/FAILED): exit 1.\n";

static const char help_release[] =
    "usage: oncectl release SCOPE KEY --owner-token TOKEN\n"
    "         [--terminal [--error TEXT]] [--request-id HEX32]\n"
    "\n"
    "The owner gives a PENDING IDEMPOTENT record up: the next claim takes\n"
    "over with a new owner token (RELEASED), or with --terminal the record\n"
    "FAILED for good and every later claim gets FAILED with the error.\n"
    "\n"
    "  --owner-token TOKEN   GROUP:INDEX:SLOT in decimal (required)\n"
    "  --terminal            fail terminally instead of releasing\n"
    "  --error TEXT          0..1024 bytes stored with --terminal\n"
    "  --request-id HEX32    32 hex digits; default: fresh random\n"
    "\n"
    "Success: RELEASED, or FAILED with --terminal (exit 0). NOT_OWNER,\n"
    "NOT_FOUND, CONFLICT, and FAILED without --terminal: exit 1.\n";

static const char help_lookup[] =
    "usage: oncectl lookup SCOPE KEY [--leader]\n"
    "\n"
    "Read a record, linearizably; records nothing. The node the call\n"
    "reaches reads its own table after a read barrier (it asks the leader\n"
    "for an index proven current and waits until it applied it); a node\n"
    "cut off from the leader answers UNAVAILABLE (exit 3), never a stale\n"
    "read.\n"
    "\n"
    "  --leader              the leader reads (the call is forwarded there)\n"
    "\n"
    "Outcomes: FOUND (exit 0) with served_by (the id of the node that\n"
    "read), log_time_ms (the log time of the read),\n"
    "kind, state, first_request_id, first_index, first_time_ms,\n"
    "expires_ms, attempts_total, attempts [{request_id, execution_id,\n"
    "index, time_ms, outcome, retry}] (the first and the last 4), and for\n"
    "IDEMPOTENT records owner_token, owner_attempt, lease_expires_ms,\n"
    "result_b64 or stored_error; NOT_FOUND (exit 1) with served_by.\n";

static const char help_forget[] =
    "usage: oncectl forget SCOPE KEY\n"
    "\n"
    "Admin: delete a record and its history. This reopens the key: the next\n"
    "claim is ACCEPTED.\n"
    "\n"
    "Outcomes: FORGOTTEN (exit 0), NOT_FOUND (exit 1).\n";

static const char help_status[] =
    "usage: oncectl status [--node IP:PORT] [--state-digest]\n"
    "\n"
    "One node's own view, never forwarded: of the first --cluster address\n"
    "that answers, or of --node (added to the addresses if not among them).\n"
    "\n"
    "  --node IP:PORT        the node to ask\n"
    "  --state-digest        also state_digest: the node hashes its whole\n"
    "                        state machine (O(state); equal on nodes at one\n"
    "                        applied_index)\n"
    "\n"
    "Fields: outcome OK, role (LEADER, FOLLOWER, CANDIDATE, UNAVAILABLE),\n"
    "member_role, term, commit_index, applied_index, applied_digest (16\n"
    "hex digits: equal on nodes at the same applied_index), config_index,\n"
    "config_voters (the Raft configuration's voter ids at config_index),\n"
    "leader (hex id, \"\" if none), leader_addr, store_backend, members\n"
    "(the directory: [{id, raft_addr, client_addr, role, reachable}]),\n"
    "schema (in force), schema_max (this binary's newest); on a restored\n"
    "cluster while its fence stands restored_from, restore_time_ms,\n"
    "replay_window_until_ms, restore_stale_ts_ms; backups_open when the\n"
    "node serves backups; no_vote_cut_index while the node neither votes\n"
    "nor campaigns after cutting a torn tail at that index (onced\n"
    "--accept-cut-tail). Exit 0 when it answered.\n";

static const char help_members_list[] =
    "usage: oncectl members list\n"
    "\n"
    "The member directory, from the leader. Fields: outcome OK, members\n"
    "[{id, raft_addr, client_addr, role, reachable}]. Exit 0.\n";

static const char help_members_add[] =
    "usage: oncectl members add ID RAFT_ADDR CLIENT_ADDR [--role "
    "voter|standby]\n"
    "\n"
    "Add a node: ID is its raft id (1..16 hex digits, as its onced printed\n"
    "it), RAFT_ADDR and CLIENT_ADDR are IP:PORT. The leader adds it as a\n"
    "spare, lets it catch up, then gives it the role.\n"
    "\n"
    "  --role voter|standby  the role it ends with (default voter)\n"
    "\n"
    "Outcomes: OK (exit 0), FAILED_PRECONDITION with reason (a retired id,\n"
    "a RAFT_ADDR another member already has, a change in progress, ...):\n"
    "exit 1. A refused add leaves nothing in the member directory.\n";

static const char help_members_remove[] =
    "usage: oncectl members remove ID [--force]\n"
    "\n"
    "Remove a node (a dead one may always be removed). Its id is retired\n"
    "for ever. Removing the leader: it hands leadership to another voter\n"
    "first and answers \"not leader\"; oncectl repeats the removal on the\n"
    "new leader.\n"
    "\n"
    "The leader refuses (FAILED_PRECONDITION with the reason) to remove a\n"
    "voter when that would leave a single voter, or while a majority of\n"
    "the voters that would remain is unreachable from it.\n"
    "  --force   remove it anyway\n"
    "\n"
    "Outcomes: OK (exit 0), FAILED_PRECONDITION with reason (exit 1).\n";

static const char help_members_assign[] =
    "usage: oncectl members assign ID ROLE [--force]\n"
    "\n"
    "Change a member's role: ROLE is voter, standby or spare. Taking a\n"
    "voter's vote away is refused like a removal (see members remove).\n"
    "  --force   change it anyway\n"
    "\n"
    "Outcomes: OK (exit 0), FAILED_PRECONDITION with reason (exit 1).\n";

static const char help_transfer[] =
    "usage: oncectl members transfer [ID]\n"
    "       oncectl transfer [ID]\n"
    "\n"
    "Transfer leadership to voter ID, or (without ID) to one the leader\n"
    "chooses. Fields: outcome OK, leader (the new leader's hex id, \"\" if\n"
    "not known yet). Exit 0.\n";

static const char help_leave[] =
    "usage: oncectl leave\n"
    "\n"
    "The node at the FIRST --cluster address leaves the cluster: if it is\n"
    "the leader it transfers leadership away and waits (within --timeout)\n"
    "until it is no longer leader, then it is removed with members remove\n"
    "of its own id (which retires that id). Fields: outcome (OK or\n"
    "FAILED_PRECONDITION with reason), member_id (the node that left),\n"
    "transferred (true if leadership was moved), leader. Exit codes as\n"
    "members remove.\n";

static const char help_snapshot_take[] =
    "usage: oncectl snapshot take\n"
    "\n"
    "Take a snapshot on the leader now. Fields: outcome OK, index (the last\n"
    "index included), size_bytes. Exit 0.\n";

static const char help_snapshot_backup[] =
    "usage: oncectl snapshot backup FILE\n"
    "\n"
    "Stream a consistent snapshot from the leader into FILE: the leader\n"
    "freezes its state at one applied index and encodes it off its event\n"
    "loop; oncectl reads it in chunks (each checked), writes FILE.tmp-PID,\n"
    "fsyncs it, verifies it whole as `snapshot verify` does, and only then\n"
    "renames it to FILE. On any failure FILE is not written. Progress\n"
    "(bytes, rate, ETA) on stderr when stdout and stderr are a terminal and\n"
    "--json is not given. --timeout bounds each call, not the whole backup.\n"
    "Fields: outcome OK, file, bytes, records, index, term, log_time_ms,\n"
    "backup_cluster_id, written_by, created_ms, settings, encode_wait_ms,\n"
    "transfer_ms, verify_ms (where the time went). Exit 0; a failed\n"
    "check of the downloaded copy is outcome CORRUPT and exit 3.\n";

static const char help_snapshot_verify[] =
    "usage: oncectl snapshot verify FILE\n"
    "\n"
    "Check a backup file without contacting the cluster: the header, its\n"
    "length, every chunk's CRC-32C, the SHA-256 over the file, then the\n"
    "whole snapshot's structure, and that the header says what the\n"
    "snapshot holds. Fields: outcome OK and what it holds (as snapshot\n"
    "backup prints), exit 0; or outcome CORRUPT with offset (the byte where\n"
    "it goes wrong) and reason, exit 1. An unreadable FILE is the error\n"
    "FAILED_PRECONDITION, exit 3.\n";

static const char help_quota_set[] =
    "usage: oncectl quota set PATTERN [--max-records N] [--max-bytes B]\n"
    "\n"
    "Admin: limit the records of the scopes PATTERN names (an exact scope,\n"
    "or a prefix then '*', as in the access file). A record counts against\n"
    "one quota: its scope's exact pattern if there is one, else the longest\n"
    "matching prefix; scopes with none are bound by the cluster's limits\n"
    "only. Over its quota a scope's new records are RESOURCE_EXHAUSTED,\n"
    "naming the quota; its existing records still complete and answer, and\n"
    "other scopes are unaffected. 0 (or leaving an option out) means no\n"
    "limit on that dimension; give at least one. Bytes count as max_bytes\n"
    "does (a PENDING or RELEASED idempotent record holds 64 KiB for its\n"
    "result). At most 64 quotas. Needs log schema 2 (oncectl schema\n"
    "upgrade). Fields: outcome OK, or FAILED_PRECONDITION with reason\n"
    "(exit 1).\n";

static const char help_quota_remove[] =
    "usage: oncectl quota remove PATTERN\n"
    "\n"
    "Admin: drop PATTERN's quota; its scopes fall to the next matching\n"
    "pattern, or to the cluster's limits. Fields: outcome OK, or NOT_FOUND\n"
    "(no such quota, exit 1).\n";

static const char help_quota_list[] =
    "usage: oncectl quota list\n"
    "\n"
    "Admin: every quota, sorted by pattern, with its usage as of the\n"
    "leader's applied state (not a barrier read: a change an instant old\n"
    "may not show). Fields: outcome OK, quotas [{pattern, max_records,\n"
    "max_bytes, records, bytes}]. Exit 0.\n";

static const char help_schema_upgrade[] =
    "usage: oncectl schema upgrade [--to N]\n"
    "\n"
    "Admin: raise the log schema in force to N (default: the leader's\n"
    "newest). The leader asks every member (voters, standbys, spares) for\n"
    "its status and proposes the change only when each one's binary\n"
    "supports N; otherwise nothing changes and the answer is\n"
    "FAILED_PRECONDITION naming the members that do not (or could not be\n"
    "asked), exit 1. Already in force: OK. Upgrade\n"
    "every binary first (a rolling restart), then run this once. Fields:\n"
    "outcome, reason, schema (in force after the call).\n";

static const char help_session[] =
    "usage: oncectl session\n"
    "\n"
    "For harnesses: one JSON request per line on stdin, one JSON object per\n"
    "line on stdout (flushed per line), over one client. A request:\n"
    "  {\"cmd\":\"claim\",\"scope\":\"s\",\"key\":\"k\",\"ttl\":\"24h\","
    "\"idempotent\":false,\n"
    "   \"request_id\":\"HEX32\",\"execution_id\":\"...\",\"ts\":123,"
    "\"window\":\"5m\",\n"
    "   \"payload_hash\":\"HEX\",\"lease\":\"30s\",\"timeout\":\"2s\","
    "\"id\":ANY}\n"
    "cmd is a command name (\"claim\", \"members add\", \"transfer\",\n"
    "\"snapshot take\", ...); the other keys are its positionals and options\n"
    "with '_' for '-' (scope, key, owner_token, result, result_b64,\n"
    "terminal, error, node, raft_addr, client_addr, role, ...), plus\n"
    "timeout for this call (default: --timeout). Flags are true/false; ts\n"
    "is an integer or a decimal string. \"id\" is echoed in the answer; for\n"
    "members add/remove/assign/transfer the member id is \"member_id\", or\n"
    "\"id\" (a hex string) when member_id is absent.\n"
    "The answer is the object --json would print plus \"exit\" (the exit\n"
    "code the command would have had) and \"id\" if given. A line that is\n"
    "not JSON, too long (over 1 MiB) or wrong gives\n"
    "  {\"error\":\"INVALID_ARGUMENT\",\"applied\":\"false\","
    "\"message\":\"...\",\"exit\":2}\n"
    "and the session goes on. Blank lines are skipped; a null value is the\n"
    "same as an absent key; an unknown key is refused. EOF ends the session\n"
    "with exit 0.\n"
    "\n"
    "A batch claim (session only): up to 4096 claims in one call, applied\n"
    "in order (a key twice: ACCEPTED, then REPLAYED):\n"
    "  {\"cmd\":\"claim batch\",\"items\":[{\"scope\":\"s\",\"key\":\"k1\","
    "\"ttl\":\"1h\"},\n"
    "   {\"scope\":\"s\",\"key\":\"k2\",\"ttl\":\"1h\"}],\"timeout\":\"5s\","
    "\"id\":ANY}\n"
    "Each item takes the fields of a claim request (no cmd, id or timeout).\n"
    "The answer is {\"items\":[one claim answer per item, in order, each\n"
    "with its own \"exit\"], \"exit\":...}: 0 if every item got a decision\n"
    "(any outcome), else the exit of the first item that did not. An item\n"
    "refused alone (a bound, its scope's right, a quota) says so in its own\n"
    "answer; a malformed item refuses the whole line, exit 2.\n";

static const char help_overview[] =
    "usage: oncectl [--cluster IP:PORT,...] [--json] [--timeout DUR]\n"
    "               [--cluster-id HEX] [--tls-ca FILE [--tls-cert FILE\n"
    "               --tls-key FILE]] COMMAND [ARGS] [OPTIONS]\n"
    "\n"
    "The operator CLI of a once cluster, a replicated replay authority.\n"
    "\n"
    "Global options (accepted anywhere on the line; `--` ends options):\n"
    "  --cluster IP:PORT,...  client addresses of some or all nodes (1..64);\n"
    "                         default: $ONCE_CLUSTER if set, else\n"
    "                         " CLI_CLUSTER_DEFAULT
    "\n"
    "  --json                 print exactly one JSON object on stdout\n"
    "  --timeout DUR          deadline of each call (default 5s, 1ms..1h)\n"
    "  --cluster-id HEX       32 hex digits: refuse answers of any other\n"
    "                         cluster (default: pin the first that answers)\n"
    "  --tls-ca FILE          TLS 1.3: the CA the nodes' certificates chain\n"
    "                         to (each must name its address's IP);\n"
    "                         default $ONCE_TLS_CA; unset: plaintext\n"
    "  --tls-cert FILE        this client's certificate (PEM; default\n"
    "                         $ONCE_TLS_CERT); nodes with TLS require one\n"
    "  --tls-key FILE         its key (PEM; default $ONCE_TLS_KEY)\n"
    "  -h, --help             this text; `oncectl COMMAND --help` for one\n"
    "Durations are an integer with ms, s, m or h (250ms, 5s, 10m, 24h).\n"
    "Addresses IP:PORT are IPv4 literals (as onced takes them).\n"
    "Options take their value as `--name VALUE` or `--name=VALUE`.\n"
    "\n"
    "Commands:\n"
    "  claim SCOPE KEY [...]         first use of (scope, key)?\n"
    "  complete SCOPE KEY [...]      the owner stores an IDEMPOTENT result\n"
    "  release SCOPE KEY [...]       the owner gives up, or fails terminally\n"
    "  lookup SCOPE KEY              read a record (linearizable)\n"
    "  forget SCOPE KEY              admin: delete a record and its history\n"
    "  status [--node IP:PORT]       one node's view: role, term, indexes\n"
    "  members list                  the member directory\n"
    "  members add ID RAFT_ADDR CLIENT_ADDR [--role voter|standby]\n"
    "  members remove ID             remove a node, retire its id\n"
    "  members assign ID ROLE        voter, standby or spare\n"
    "  members transfer [ID]         move leadership (alias: transfer [ID])\n"
    "  leave                         the first --cluster node leaves\n"
    "  snapshot take                 snapshot on the leader now\n"
    "  snapshot backup FILE          a consistent backup from the leader\n"
    "  snapshot verify FILE          check a backup file (offline)\n"
    "  quota set PATTERN [--max-records N] [--max-bytes B]\n"
    "                                admin: limit a scope pattern's records\n"
    "  quota remove PATTERN          admin: drop a quota\n"
    "  quota list                    admin: quotas and their usage\n"
    "  schema upgrade [--to N]       admin: raise the log schema in force\n"
    "  session                       JSON lines in, JSON lines out\n"
    "\n"
    "Output: one readable line per answer on stdout (OUTCOME key=value ...;\n"
    "tables for status and members); an error is one line on stderr. With\n"
    "--json: exactly one JSON object on stdout, with \"outcome\" (ACCEPTED,\n"
    "REPLAYED, ..., OK) and the fields of the command (see its --help), or\n"
    "on an error \"error\" (the status name: UNAVAILABLE, DEADLINE_EXCEEDED,\n"
    "UNKNOWN, INVALID_ARGUMENT, FAILED_PRECONDITION, RESOURCE_EXHAUSTED,\n"
    "PERMISSION_DENIED), \"applied\" (\"false\" | "
    "\"unknown\"),\n"
    "\"leader_hint\", \"message\", and \"request_id\" when the call had one.\n"
    "Every object carries cluster_id, node_id and boot_id (hex, \"\" when\n"
    "not known). Owner tokens are GROUP:INDEX:SLOT in decimal, in text and\n"
    "JSON. A usage error is one line on stderr (with --json also an\n"
    "INVALID_ARGUMENT object on stdout) and exit 2; nothing is sent.\n"
    "\n"
    "Exit codes:\n"
    "  0  ACCEPTED, or the command's success: COMPLETED (complete),\n"
    "     RELEASED or with --terminal FAILED (release), FOUND (lookup),\n"
    "     FORGOTTEN (forget), OK (status, members, transfer, leave,\n"
    "     snapshot take, quota, schema upgrade)\n"
    "  1  a definite non-accept outcome: REPLAYED, DUPLICATE, IN_PROGRESS,\n"
    "     CONFLICT, STALE, FUTURE, FAILED, NOT_OWNER, NOT_FOUND, or an admin\n"
    "     command's FAILED_PRECONDITION\n"
    "  2  usage error, or INVALID_ARGUMENT (local, or from the cluster)\n"
    "  3  error, the call was certainly not applied (applied \"false\"):\n"
    "     safe to retry; also a full table (RESOURCE_EXHAUSTED)\n"
    "  4  error, the outcome is unknown (applied \"unknown\"): retry a claim,\n"
    "     complete or release with its --request-id; check the state\n"
    "     (lookup, members list, status) before repeating forget or an\n"
    "     admin command\n";

/* ------------------------------------------------------------------------ */

/* Indexed by enum cli_cmd; a command without a row has no help. */
static const char *const help_of[] = {
    [CLI_CLAIM] = help_claim,
    [CLI_COMPLETE] = help_complete,
    [CLI_RELEASE] = help_release,
    [CLI_LOOKUP] = help_lookup,
    [CLI_FORGET] = help_forget,
    [CLI_STATUS] = help_status,
    [CLI_MEMBERS_LIST] = help_members_list,
    [CLI_MEMBERS_ADD] = help_members_add,
    [CLI_MEMBERS_REMOVE] = help_members_remove,
    [CLI_MEMBERS_ASSIGN] = help_members_assign,
    [CLI_TRANSFER] = help_transfer,
    [CLI_LEAVE] = help_leave,
    [CLI_SNAPSHOT_TAKE] = help_snapshot_take,
    [CLI_SNAPSHOT_BACKUP] = help_snapshot_backup,
    [CLI_SNAPSHOT_VERIFY] = help_snapshot_verify,
    [CLI_SESSION] = help_session,
    [CLI_QUOTA_SET] = help_quota_set,
    [CLI_QUOTA_REMOVE] = help_quota_remove,
    [CLI_QUOTA_LIST] = help_quota_list,
    [CLI_SCHEMA_UPGRADE] = help_schema_upgrade,
};

const char *cli_help_overview(void)
{
    return help_overview;
}

const char *cli_help_command(enum cli_cmd cmd)
{
    if ((unsigned)cmd >= sizeof help_of / sizeof help_of[0]) {
        return NULL;
    }
    return help_of[cmd];
}
