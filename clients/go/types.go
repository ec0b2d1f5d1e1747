package once

import (
	"fmt"
	"strconv"
	"strings"
)

// Outcome is the cluster's decision on a call (docs/state-machine.md): the
// names of include/once.h's enum once_outcome, as the JSON answers spell
// them.
type Outcome string

// The outcomes an answer can carry.
const (
	Accepted   Outcome = "ACCEPTED"    // the claim is yours (a nonce used now, or an idempotency key owned)
	Replayed   Outcome = "REPLAYED"    // a nonce seen before under another request id
	Duplicate  Outcome = "DUPLICATE"   // an idempotency key completed: the stored result is in Answer.Result
	InProgress Outcome = "IN_PROGRESS" // another owner holds the key; retry after Answer.RetryAfterMS
	Conflict   Outcome = "CONFLICT"    // another kind, another payload hash, or a call the record's state refuses
	Stale      Outcome = "STALE"       // ts older than the window
	Future     Outcome = "FUTURE"      // ts beyond the cluster's max skew
	Failed     Outcome = "FAILED"      // the key failed for good (terminal release): Answer.StoredError
	NotOwner   Outcome = "NOT_OWNER"   // the owner token is not the current owner's (fenced)
	NotFound   Outcome = "NOT_FOUND"   // no such record
	Completed  Outcome = "COMPLETED"   // complete: the result is stored
	Released   Outcome = "RELEASED"    // release: the next claim takes over
	Found      Outcome = "FOUND"       // lookup of a live record
	Forgotten  Outcome = "FORGOTTEN"   // forget (admin; not served by the HTTP API)
	OK         Outcome = "OK"          // status
	// The state machine's refusals; the client turns them into an *Error,
	// so a returned Answer never carries them.
	OutOfSpace      Outcome = "RESOURCE_EXHAUSTED"
	RefusedArgument Outcome = "INVALID_ARGUMENT"
)

// Kind is a record's kind.
type Kind string

// The record kinds.
const (
	Nonce      Kind = "NONCE"
	Idempotent Kind = "IDEMPOTENT"
)

// State is a record's state.
type State string

// The record states.
const (
	StateSeen      State = "SEEN" // a nonce
	StatePending   State = "PENDING"
	StateCompleted State = "COMPLETED"
	StateReleased  State = "RELEASED"
	StateFailed    State = "FAILED"
)

// RaftRole is a node's Raft role in a Status answer.
type RaftRole string

// The Raft roles.
const (
	RoleLeader      RaftRole = "LEADER"
	RoleFollower    RaftRole = "FOLLOWER"
	RoleCandidate   RaftRole = "CANDIDATE"
	RoleUnavailable RaftRole = "UNAVAILABLE"
)

// MemberRole is a member's role in the cluster's directory.
type MemberRole string

// The member roles.
const (
	MemberVoter   MemberRole = "VOTER"
	MemberStandby MemberRole = "STANDBY"
	MemberSpare   MemberRole = "SPARE"
)

// Attempt is one kept claim of a record: the first and the last four.
type Attempt struct {
	RequestID   string `json:"request_id"`
	ExecutionID string `json:"execution_id"`
	// ExecutionIDB64 holds an execution id that is not valid UTF-8 (then
	// ExecutionID is empty).
	ExecutionIDB64 []byte  `json:"execution_id_b64,omitempty"`
	Index          uint64  `json:"index"`
	TimeMS         uint64  `json:"time_ms"`
	Outcome        Outcome `json:"outcome"`
	Retry          bool    `json:"retry"`
}

// Answer is the cluster's decision on a claim, complete, release or lookup:
// every field of the JSON answer (docs/oncectl.md, docs/http-api.md). A
// field the answer did not carry is its zero value.
type Answer struct {
	Outcome Outcome `json:"outcome"`
	// Retry: this call repeated an earlier one with the same request id
	// (an ACCEPTED retry=true is still the original acceptance).
	Retry bool `json:"retry"`
	// LogTimeMS: the cluster's log time (unix ms) the answer was decided at.
	LogTimeMS      uint64    `json:"log_time_ms"`
	RequestID      string    `json:"request_id"`
	FirstRequestID string    `json:"first_request_id"`
	FirstIndex     uint64    `json:"first_index"`
	FirstTimeMS    uint64    `json:"first_time_ms"`
	AttemptsTotal  uint64    `json:"attempts_total"`
	Attempts       []Attempt `json:"attempts"`
	// OwnerToken ("GROUP:INDEX:SLOT") is given only to the owner: an
	// ACCEPTED idempotent claim, complete, release and lookup.
	OwnerToken   string `json:"owner_token"`
	OwnerAttempt uint32 `json:"owner_attempt"`
	// Result is the stored result (DUPLICATE, COMPLETED, lookup of a
	// COMPLETED record): nil when the answer has none, empty when it is "".
	Result         []byte `json:"result_b64"`
	StoredError    string `json:"stored_error"`
	StoredErrorB64 []byte `json:"stored_error_b64,omitempty"`
	RetryAfterMS   uint64 `json:"retry_after_ms"`
	Reason         string `json:"reason"`
	Kind           Kind   `json:"kind"`
	State          State  `json:"state"`
	ExpiresMS      uint64 `json:"expires_ms"`
	LeaseExpiresMS uint64 `json:"lease_expires_ms"`
	// An N-use NONCE (ClaimRequest.MaxUses; a single-use one at schema 3
	// says 1 and 1): the uses it takes, the uses accepted so far, and
	// the difference. Zero on an IDEMPOTENT record or a schema-2 answer.
	MaxUses  uint32 `json:"max_uses"`
	Uses     uint32 `json:"uses"`
	UsesLeft uint32 `json:"uses_left"`
	// Sliding: an IDEMPOTENT record whose retention slides
	// (ClaimRequest.Sliding).
	Sliding bool `json:"sliding"`
	// ServedBy (lookup): the id (16 hex digits) of the node that read its
	// table after a read barrier; with this API, the node that received
	// the request.
	ServedBy string `json:"served_by"`
	// Who answered: the node that received the HTTP request.
	ClusterID string `json:"cluster_id"`
	NodeID    string `json:"node_id"`
	BootID    string `json:"boot_id"`
}

// Member is one entry of the cluster's member directory.
type Member struct {
	ID         string     `json:"id"`
	RaftAddr   string     `json:"raft_addr"`
	ClientAddr string     `json:"client_addr"`
	Role       MemberRole `json:"role"`
	Reachable  bool       `json:"reachable"`
}

// StatusAnswer is one node's own view (never forwarded): every field of
// the JSON answer of GET /v1/status.
type StatusAnswer struct {
	Outcome      Outcome    `json:"outcome"`
	Role         RaftRole   `json:"role"`
	MemberRole   MemberRole `json:"member_role"`
	Term         uint64     `json:"term"`
	CommitIndex  uint64     `json:"commit_index"`
	AppliedIndex uint64     `json:"applied_index"`
	// AppliedDigest: 16 hex digits, equal on nodes at one applied index.
	AppliedDigest string `json:"applied_digest"`
	// On a restored cluster while its fence stands.
	RestoredFrom        string `json:"restored_from"`
	RestoreTimeMS       uint64 `json:"restore_time_ms"`
	ReplayWindowUntilMS uint64 `json:"replay_window_until_ms"`
	RestoreStaleTSMS    uint64 `json:"restore_stale_ts_ms"`
	BackupsOpen         uint64 `json:"backups_open"`
	// NoVoteCutIndex: non-zero while the node neither votes nor
	// campaigns, its store having cut a torn tail at this index (onced
	// --accept-cut-tail is the way out).
	NoVoteCutIndex uint64 `json:"no_vote_cut_index"`
	StateDigest    string `json:"state_digest"`
	Schema         uint32 `json:"schema"`
	SchemaMax      uint32 `json:"schema_max"`
	ConfigIndex    uint64 `json:"config_index"`
	// ConfigVoters: the voter ids (hex) of the Raft configuration.
	ConfigVoters []string `json:"config_voters"`
	// Leader: the leader's id (hex), "" if none known.
	Leader       string   `json:"leader"`
	LeaderAddr   string   `json:"leader_addr"`
	StoreBackend string   `json:"store_backend"`
	Members      []Member `json:"members"`
	ClusterID    string   `json:"cluster_id"`
	NodeID       string   `json:"node_id"`
	BootID       string   `json:"boot_id"`
}

// Token is an owner token, "GROUP:INDEX:SLOT".
type Token struct {
	Group uint32
	Index uint64
	Slot  uint32
}

// String gives the token as the API spells it.
func (t Token) String() string {
	return fmt.Sprintf("%d:%d:%d", t.Group, t.Index, t.Slot)
}

// ParseToken reads "GROUP:INDEX:SLOT".
func ParseToken(s string) (Token, error) {
	var t Token
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return t, fmt.Errorf("owner token %q: want GROUP:INDEX:SLOT", s)
	}
	g, err1 := strconv.ParseUint(parts[0], 10, 32)
	i, err2 := strconv.ParseUint(parts[1], 10, 64)
	sl, err3 := strconv.ParseUint(parts[2], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		return t, fmt.Errorf("owner token %q: want GROUP:INDEX:SLOT in decimal", s)
	}
	return Token{Group: uint32(g), Index: i, Slot: uint32(sl)}, nil
}
