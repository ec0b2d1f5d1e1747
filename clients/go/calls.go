package once

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// ClaimRequest is a claim: a NONCE (TTL, or TS and Window) or, with
// Idempotent, an idempotency key (Lease, PayloadHash).
type ClaimRequest struct {
	Scope string // 1..128 bytes of UTF-8, no NUL
	Key   string // 1..256 bytes of UTF-8, no NUL
	// Idempotent: an IDEMPOTENT record (owner token, lease); else a NONCE.
	Idempotent bool
	// RequestID: "" for a fresh one; give one (32 hex digits) only to
	// repeat a call whose outcome was unknown (Error.RequestID).
	RequestID string
	// ExecutionID: 0..128 bytes, kept as evidence in the attempts.
	ExecutionID string
	// TTL: how long the record is kept. Default 24 h when neither TTL nor
	// TS is given (oncectl's). Whole milliseconds.
	TTL time.Duration
	// TS: a signed timestamp (zero: none); with Window, the claim is
	// STALE before now−Window and FUTURE after now+max_skew.
	TS     time.Time
	Window time.Duration
	// PayloadHash: 0..64 bytes (IDEMPOTENT only): a claim with another
	// hash is a CONFLICT.
	PayloadHash []byte
	// Lease: how long the owner holds the key (IDEMPOTENT only; 0: the
	// cluster's default).
	Lease time.Duration
	// MaxUses: how many request ids a NONCE accepts before REPLAYED,
	// 1..MaxUses (64); 0 sends nothing (a single use). The first claim
	// fixes it: a later claim with another value is CONFLICT. Needs a
	// cluster at log schema 3 (else FAILED_PRECONDITION).
	MaxUses int
	// Sliding (IDEMPOTENT with a TTL only): every DUPLICATE, IN_PROGRESS
	// or FAILED answer moves the record's expiry to its log time + TTL,
	// never past the cluster's max_ttl from the first claim. The first
	// claim fixes it. Needs log schema 3.
	Sliding bool
}

// CompleteRequest: the owner stores its result.
type CompleteRequest struct {
	Scope, Key string
	OwnerToken string // "GROUP:INDEX:SLOT", as the claim returned it
	Result     []byte // 0..64 KiB
	RequestID  string // "" for a fresh one
}

// ReleaseRequest: the owner gives the key up (the next claim takes over)
// or, with Terminal, fails it for good with Error stored.
type ReleaseRequest struct {
	Scope, Key string
	OwnerToken string
	Terminal   bool
	Error      string // 0..1024 bytes of UTF-8
	RequestID  string
}

func checkText(name, s string, min, max int) *Error {
	if len(s) < min || len(s) > max {
		if min > 0 {
			return invalid("%s: %d bytes, want %d..%d", name, len(s), min, max)
		}
		return invalid("%s: %d bytes, at most %d", name, len(s), max)
	}
	if !utf8.ValidString(s) {
		// The API carries JSON strings: other bytes need libonce.
		return invalid("%s: not valid UTF-8", name)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalid("%s: holds a NUL byte", name)
	}
	return nil
}

func checkIdentity(scope, key string) *Error {
	if e := checkText("scope", scope, 1, MaxScope); e != nil {
		return e
	}
	return checkText("key", key, 1, MaxKey)
}

// requestID gives the call's request id: the caller's (checked) or fresh.
func requestID(given string) (string, *Error) {
	if given == "" {
		return NewRequestID(), nil
	}
	if !isHex(given, 32) {
		return "", invalid("request id: want 32 hex digits, got %q", given)
	}
	return strings.ToLower(given), nil
}

// millis gives d in whole milliseconds (>= 1 when d > 0).
func millis(name string, d time.Duration) (int64, *Error) {
	if d < 0 {
		return 0, invalid("%s: negative (%v)", name, d)
	}
	if d > 0 && d < time.Millisecond {
		return 0, invalid("%s: %v is under 1ms", name, d)
	}
	return d.Milliseconds(), nil
}

func checkToken(tok string) *Error {
	if tok == "" {
		return invalid("owner token: required")
	}
	if _, err := ParseToken(tok); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// Claim claims a nonce or an idempotency key. It returns the cluster's
// decision (ACCEPTED, REPLAYED, DUPLICATE, IN_PROGRESS, CONFLICT, STALE,
// FUTURE, FAILED) or an *Error.
func (c *Client) Claim(ctx context.Context, r ClaimRequest) (*Answer, error) {
	body, rid, e := claimBody(r)
	if e != nil {
		return nil, e
	}
	var a Answer
	err := c.run(ctx, &call{op: "claim", method: http.MethodPost, path: "/v1/claim", body: body, write: true, requestID: rid}, &a)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// claimBody checks a claim and gives its JSON object (without "timeout"
// and "cluster_id", which each attempt adds) and its request id: the body
// of /v1/claim and an item of /v1/claims alike.
func claimBody(r ClaimRequest) (map[string]interface{}, string, *Error) {
	if e := checkIdentity(r.Scope, r.Key); e != nil {
		return nil, "", e
	}
	rid, e := requestID(r.RequestID)
	if e != nil {
		return nil, "", e
	}
	if e := checkText("execution id", r.ExecutionID, 0, MaxExecutionID); e != nil {
		return nil, "", e
	}
	body := map[string]interface{}{"scope": r.Scope, "key": r.Key, "request_id": rid}
	if r.ExecutionID != "" {
		body["execution_id"] = r.ExecutionID
	}
	ttl, e := millis("ttl", r.TTL)
	if e != nil {
		return nil, "", e
	}
	if ttl > 0 {
		body["ttl"] = ttl
	}
	if !r.TS.IsZero() {
		ts := r.TS.UnixMilli()
		if ts < 0 {
			return nil, "", invalid("ts: before 1970 (%v)", r.TS)
		}
		w, e := millis("window", r.Window)
		if e != nil {
			return nil, "", e
		}
		if w == 0 {
			return nil, "", invalid("window: required with ts")
		}
		body["ts"] = ts
		body["window"] = w
	} else if r.Window != 0 {
		return nil, "", invalid("window: only with ts")
	}
	if r.Idempotent {
		body["idempotent"] = true
		if len(r.PayloadHash) > MaxPayloadHash {
			return nil, "", invalid("payload hash: %d bytes, at most %d", len(r.PayloadHash), MaxPayloadHash)
		}
		if len(r.PayloadHash) > 0 {
			body["payload_hash"] = hex.EncodeToString(r.PayloadHash)
		}
		lease, e := millis("lease", r.Lease)
		if e != nil {
			return nil, "", e
		}
		if lease > 0 {
			body["lease"] = lease
		}
	} else if len(r.PayloadHash) > 0 || r.Lease != 0 {
		return nil, "", invalid("payload hash and lease: only with Idempotent")
	}
	if e := claimExtensions(r, ttl, body); e != nil {
		return nil, "", e
	}
	return body, rid, nil
}

// claimExtensions checks and adds the schema-3 fields (docs/http-api.md):
// max_uses 1..64 on a NONCE only, sliding on an IDEMPOTENT claim with a
// ttl only. A cluster still at schema 2 refuses either with
// FAILED_PRECONDITION (ErrFailedPrecondition, Definite).
func claimExtensions(r ClaimRequest, ttl int64, body map[string]interface{}) *Error {
	if r.MaxUses != 0 {
		if r.MaxUses < 1 || r.MaxUses > MaxUses {
			return invalid("max uses: %d, want 1..%d (0: not sent, a single use)", r.MaxUses, MaxUses)
		}
		if r.Idempotent {
			return invalid("max uses: only on a nonce (not with Idempotent)")
		}
		body["max_uses"] = r.MaxUses
	}
	if r.Sliding {
		if !r.Idempotent {
			// A replayed nonce must not extend its own life (docs/state-machine.md).
			return invalid("sliding: only with Idempotent (a nonce cannot slide)")
		}
		if ttl == 0 {
			return invalid("sliding: needs a TTL (the retention each answer renews)")
		}
		body["sliding"] = true
	}
	return nil
}

// Complete stores the owner's result: COMPLETED (retry=true when repeated),
// NOT_OWNER when another owner took over (fenced: nothing changes),
// CONFLICT, NOT_FOUND.
func (c *Client) Complete(ctx context.Context, r CompleteRequest) (*Answer, error) {
	if e := checkIdentity(r.Scope, r.Key); e != nil {
		return nil, e
	}
	if e := checkToken(r.OwnerToken); e != nil {
		return nil, e
	}
	if len(r.Result) > MaxResult {
		return nil, invalid("result: %d bytes, at most %d", len(r.Result), MaxResult)
	}
	rid, e := requestID(r.RequestID)
	if e != nil {
		return nil, e
	}
	body := map[string]interface{}{
		"scope": r.Scope, "key": r.Key, "request_id": rid, "owner_token": r.OwnerToken,
		// Bytes as base64: a result need not be text.
		"result_b64": base64.StdEncoding.EncodeToString(r.Result),
	}
	var a Answer
	err := c.run(ctx, &call{op: "complete", method: http.MethodPost, path: "/v1/complete", body: body, write: true, requestID: rid}, &a)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// Release gives the key up (RELEASED; the next claim takes over) or, with
// Terminal, fails it for good (FAILED, Error stored); NOT_OWNER when
// fenced.
func (c *Client) Release(ctx context.Context, r ReleaseRequest) (*Answer, error) {
	if e := checkIdentity(r.Scope, r.Key); e != nil {
		return nil, e
	}
	if e := checkToken(r.OwnerToken); e != nil {
		return nil, e
	}
	if e := checkText("error", r.Error, 0, MaxError); e != nil {
		return nil, e
	}
	rid, e := requestID(r.RequestID)
	if e != nil {
		return nil, e
	}
	body := map[string]interface{}{"scope": r.Scope, "key": r.Key, "request_id": rid, "owner_token": r.OwnerToken}
	if r.Terminal {
		body["terminal"] = true
	}
	if r.Error != "" {
		body["error"] = r.Error
	}
	var a Answer
	err := c.run(ctx, &call{op: "release", method: http.MethodPost, path: "/v1/release", body: body, write: true, requestID: rid}, &a)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// Lookup reads a record linearizably: FOUND (every fact and the kept
// attempts) or NOT_FOUND. It records nothing.
func (c *Client) Lookup(ctx context.Context, scope, key string) (*Answer, error) {
	if e := checkIdentity(scope, key); e != nil {
		return nil, e
	}
	path := "/v1/records/" + url.PathEscape(scope) + "/" + url.PathEscape(key)
	var a Answer
	if err := c.run(ctx, &call{op: "lookup", method: http.MethodGet, path: path}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Status gives one node's own view: the node at node (a base URL; it need
// not be one of Config.Nodes), or "" for the first node that answers.
func (c *Client) Status(ctx context.Context, node string) (*StatusAnswer, error) {
	k := &call{op: "status", method: http.MethodGet, path: "/v1/status"}
	if node != "" {
		base, err := baseURL(node, strings.HasPrefix(c.nodes[0], "https://"))
		if err != nil {
			return nil, invalid("node: %v", err)
		}
		k.oneNode = base
	}
	var s StatusAnswer
	if err := c.run(ctx, k, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
