/* client/names.c: the printable names of once.h's enums.
 *
 * Spellings are docs/design.md §6's (what oncectl prints and harnesses parse):
 * outcomes, statuses, states and roles in capitals ("ACCEPTED",
 * "UNAVAILABLE", "SEEN", "VOTER", "LEADER"); applied in lower case ("false",
 * "unknown"; "none" for a status OK). Outcomes 13 and 14 carry their wire
 * names (RESOURCE_EXHAUSTED, INVALID_ARGUMENT), which are also the state
 * machine's (fsm_outcome_name). A number out of range is "UNKNOWN_VALUE". */
#include "once.h"

#define UNKNOWN_VALUE "UNKNOWN_VALUE"

const char *once_outcome_name(enum once_outcome o)
{
    switch (o) {
        case ONCE_UNSPECIFIED:
            return "UNSPECIFIED";
        case ONCE_ACCEPTED:
            return "ACCEPTED";
        case ONCE_REPLAYED:
            return "REPLAYED";
        case ONCE_DUPLICATE:
            return "DUPLICATE";
        case ONCE_IN_PROGRESS:
            return "IN_PROGRESS";
        case ONCE_CONFLICT:
            return "CONFLICT";
        case ONCE_STALE:
            return "STALE";
        case ONCE_FUTURE:
            return "FUTURE";
        case ONCE_FAILED:
            return "FAILED";
        case ONCE_NOT_OWNER:
            return "NOT_OWNER";
        case ONCE_NOT_FOUND:
            return "NOT_FOUND";
        case ONCE_COMPLETED:
            return "COMPLETED";
        case ONCE_RELEASED:
            return "RELEASED";
        case ONCE_OUT_OF_SPACE:
            return "RESOURCE_EXHAUSTED";
        case ONCE_REFUSED_ARGUMENT:
            return "INVALID_ARGUMENT";
        case ONCE_FOUND:
            return "FOUND";
        case ONCE_FORGOTTEN:
            return "FORGOTTEN";
        case ONCE_OK:
            return "OK";
        case ONCE_FAILED_PRECONDITION:
            return "FAILED_PRECONDITION";
    }
    return UNKNOWN_VALUE;
}

const char *once_status_name(enum once_status s)
{
    switch (s) {
        case ONCE_STATUS_OK:
            return "OK";
        case ONCE_STATUS_UNKNOWN:
            return "UNKNOWN";
        case ONCE_STATUS_INVALID_ARGUMENT:
            return "INVALID_ARGUMENT";
        case ONCE_STATUS_DEADLINE_EXCEEDED:
            return "DEADLINE_EXCEEDED";
        case ONCE_STATUS_PERMISSION_DENIED:
            return "PERMISSION_DENIED";
        case ONCE_STATUS_RESOURCE_EXHAUSTED:
            return "RESOURCE_EXHAUSTED";
        case ONCE_STATUS_FAILED_PRECONDITION:
            return "FAILED_PRECONDITION";
        case ONCE_STATUS_UNAVAILABLE:
            return "UNAVAILABLE";
    }
    return UNKNOWN_VALUE;
}

const char *once_applied_name(enum once_applied a)
{
    switch (a) {
        case ONCE_APPLIED_NONE:
            return "none";
        case ONCE_APPLIED_FALSE:
            return "false";
        case ONCE_APPLIED_UNKNOWN:
            return "unknown";
    }
    return UNKNOWN_VALUE;
}

const char *once_role_name(enum once_role r)
{
    switch (r) {
        case ONCE_ROLE_NONE:
            return "NONE";
        case ONCE_ROLE_VOTER:
            return "VOTER";
        case ONCE_ROLE_STANDBY:
            return "STANDBY";
        case ONCE_ROLE_SPARE:
            return "SPARE";
    }
    return UNKNOWN_VALUE;
}

const char *once_raft_role_name(enum once_raft_role r)
{
    switch (r) {
        case ONCE_RAFT_NONE:
            return "NONE";
        case ONCE_RAFT_FOLLOWER:
            return "FOLLOWER";
        case ONCE_RAFT_CANDIDATE:
            return "CANDIDATE";
        case ONCE_RAFT_LEADER:
            return "LEADER";
        case ONCE_RAFT_UNAVAILABLE:
            return "UNAVAILABLE";
    }
    return UNKNOWN_VALUE;
}

const char *once_state_name(enum once_state s)
{
    switch (s) {
        case ONCE_STATE_NONE:
            return "NONE";
        case ONCE_STATE_SEEN:
            return "SEEN";
        case ONCE_STATE_PENDING:
            return "PENDING";
        case ONCE_STATE_COMPLETED:
            return "COMPLETED";
        case ONCE_STATE_RELEASED:
            return "RELEASED";
        case ONCE_STATE_FAILED:
            return "FAILED";
    }
    return UNKNOWN_VALUE;
}
