package once

// Tests against a real 3-node cluster started by
// clients/testing/with_cluster.py (ONCE_TEST_HTTP, ONCE_TEST_CONTROL).
// Without it they skip, unless ONCE_GO_REQUIRE_CLUSTER=1 (what
// clients/go/test sets), then they fail. The tests that stop nodes or
// re-create the cluster come last in this file (go test runs tests in
// source order) and leave a serving cluster behind.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type testCluster struct {
	urls    []string
	control string
	tls     bool
}

func cluster(t *testing.T) *testCluster {
	t.Helper()
	urls := os.Getenv("ONCE_TEST_HTTP")
	if urls == "" || os.Getenv("ONCE_TEST_CONTROL") == "" {
		if os.Getenv("ONCE_GO_REQUIRE_CLUSTER") == "1" {
			t.Fatal("ONCE_TEST_HTTP / ONCE_TEST_CONTROL not set: run under clients/testing/with_cluster.py")
		}
		t.Skip("no cluster: run clients/go/test (clients/testing/with_cluster.py)")
	}
	return &testCluster{
		urls:    strings.Split(urls, ","),
		control: os.Getenv("ONCE_TEST_CONTROL"),
		tls:     os.Getenv("ONCE_TEST_CA") != "",
	}
}

// plainOnly skips a test in the TLS run (clients/go/test runs the TLS
// part with -run, so this only guards a hand-made run).
func (tc *testCluster) plainOnly(t *testing.T) {
	if tc.tls {
		t.Skip("runs against the plain cluster")
	}
}

// ctl sends one request to the cluster controller and returns its answer.
func (tc *testCluster) ctl(t *testing.T, req map[string]interface{}) map[string]interface{} {
	t.Helper()
	ans, err := tc.ctlErr(req)
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

// ctlErr is ctl for a goroutine other than the test's (which must not
// call t.Fatal).
func (tc *testCluster) ctlErr(req map[string]interface{}) (map[string]interface{}, error) {
	b, _ := json.Marshal(req)
	conn, err := net.DialTimeout("unix", tc.control, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("control socket: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(180 * time.Second))
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("control %s: %v", b, err)
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("control %s: %v", b, err)
	}
	var ans map[string]interface{}
	if err := json.Unmarshal(line, &ans); err != nil || ans["ok"] != true {
		return nil, fmt.Errorf("control %s: %s", b, line)
	}
	return ans, nil
}

func tlsFiles(t *testing.T, certEnv, keyEnv string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(os.Getenv("ONCE_TEST_CA"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("ONCE_TEST_CA: no certificate")
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if certEnv != "" {
		cert, err := tls.LoadX509KeyPair(os.Getenv(certEnv), os.Getenv(keyEnv))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// client gives a client of nodes (default: all), as the admin under TLS.
func (tc *testCluster) client(t *testing.T, nodes ...string) *Client {
	t.Helper()
	if len(nodes) == 0 {
		nodes = tc.urls
	}
	cfg := Config{Nodes: nodes, Timeout: 10 * time.Second}
	if tc.tls {
		cfg.TLS = tlsFiles(t, "ONCE_TEST_ADMIN_CERT", "ONCE_TEST_ADMIN_KEY")
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// scope gives a scope of its own to each test run.
func scope(t *testing.T) string {
	return "go-" + NewRequestID()[:12]
}

func mustOutcome(t *testing.T, what string, a *Answer, err error, want Outcome) *Answer {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: want %s, got error %v", what, want, err)
	}
	if a.Outcome != want {
		t.Fatalf("%s: want %s, got %+v", what, want, a)
	}
	return a
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestOutcomesNonce(t *testing.T) {
	tc := cluster(t)
	sc := scope(t)
	ctx := ctxFor(t, 30*time.Second)
	ca := tc.client(t, tc.urls[0])
	cb := tc.client(t, tc.urls[1])

	a, err := ca.Claim(ctx, ClaimRequest{Scope: sc, Key: "n1", TTL: time.Hour, ExecutionID: "job-1"})
	first := mustOutcome(t, "nonce claim", a, err, Accepted)
	if first.Retry || first.Kind != Nonce || first.State != StateSeen || !isHex(first.RequestID, 32) ||
		first.FirstRequestID != first.RequestID || first.ClusterID == "" || ca.ClusterID() != first.ClusterID {
		t.Fatalf("ACCEPTED: %+v (pinned %q)", first, ca.ClusterID())
	}
	// Another node (a follower forwards): REPLAYED, naming the first.
	a, err = cb.Claim(ctx, ClaimRequest{Scope: sc, Key: "n1", TTL: time.Hour})
	mustOutcome(t, "replay through another node", a, err, Replayed)
	if a.FirstRequestID != first.RequestID || a.AttemptsTotal != 1 || a.RequestID == first.RequestID {
		t.Fatalf("REPLAYED: %+v", a)
	}
	// The same call again (its request id): ACCEPTED retry=true.
	a, err = cb.Claim(ctx, ClaimRequest{Scope: sc, Key: "n1", TTL: time.Hour, RequestID: first.RequestID})
	mustOutcome(t, "retry with the same request id", a, err, Accepted)
	if !a.Retry {
		t.Fatalf("retry: %+v", a)
	}
	// Signed timestamps and their window.
	now := time.Now()
	a, err = ca.Claim(ctx, ClaimRequest{Scope: sc, Key: "ts-ok", TS: now, Window: 5 * time.Minute})
	mustOutcome(t, "ts within the window", a, err, Accepted)
	a, err = ca.Claim(ctx, ClaimRequest{Scope: sc, Key: "ts-old", TS: now.Add(-10 * time.Minute), Window: time.Minute})
	mustOutcome(t, "ts before the window", a, err, Stale)
	a, err = ca.Claim(ctx, ClaimRequest{Scope: sc, Key: "ts-new", TS: now.Add(10 * time.Minute), Window: time.Minute})
	mustOutcome(t, "ts beyond the skew", a, err, Future)
	// Another kind on a nonce's key.
	a, err = ca.Claim(ctx, ClaimRequest{Scope: sc, Key: "n1", Idempotent: true})
	mustOutcome(t, "idempotent claim of a nonce", a, err, Conflict)
	// Lookup: FOUND with its attempts; NOT_FOUND; keys that need escapes.
	a, err = cb.Lookup(ctx, sc, "n1")
	mustOutcome(t, "lookup", a, err, Found)
	if a.AttemptsTotal < 3 || len(a.Attempts) < 3 || a.Attempts[0].Outcome != Replayed || a.Kind != Nonce {
		t.Fatalf("FOUND: %+v", a)
	}
	a, err = ca.Lookup(ctx, sc, "never-claimed")
	mustOutcome(t, "lookup of nothing", a, err, NotFound)
	odd := "a/b c%d?é"
	a, err = ca.Claim(ctx, ClaimRequest{Scope: sc, Key: odd})
	mustOutcome(t, "claim of an odd key", a, err, Accepted)
	a, err = ca.Lookup(ctx, sc, odd)
	mustOutcome(t, "lookup of an odd key", a, err, Found)
	// A bound only the cluster knows: its INVALID_ARGUMENT, Definite.
	_, err = ca.Claim(ctx, ClaimRequest{Scope: sc, Key: "too-long-ttl", TTL: 1000 * time.Hour})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalidArgument) || e.Kind != Definite || e.Node == "" || e.HTTPStatus != 400 {
		t.Fatalf("ttl above max_ttl: want the node's INVALID_ARGUMENT, got %#v", err)
	}
}

func TestOutcomesIdempotent(t *testing.T) {
	tc := cluster(t)
	sc := scope(t)
	ctx := ctxFor(t, 30*time.Second)
	c := tc.client(t)
	other := tc.client(t, tc.urls[2])
	hash := []byte{0xab, 0x12}

	a, err := c.Claim(ctx, ClaimRequest{Scope: sc, Key: "o-1", Idempotent: true, PayloadHash: hash, Lease: 30 * time.Second})
	own := mustOutcome(t, "idempotent claim", a, err, Accepted)
	if own.OwnerToken == "" || own.OwnerAttempt != 1 || own.State != StatePending || own.Kind != Idempotent || own.LeaseExpiresMS == 0 {
		t.Fatalf("ACCEPTED: %+v", own)
	}
	a, err = other.Claim(ctx, ClaimRequest{Scope: sc, Key: "o-1", Idempotent: true, PayloadHash: hash})
	mustOutcome(t, "second claimant", a, err, InProgress)
	if a.RetryAfterMS == 0 || a.OwnerToken != "" {
		t.Fatalf("IN_PROGRESS: %+v", a)
	}
	a, err = other.Claim(ctx, ClaimRequest{Scope: sc, Key: "o-1", Idempotent: true, PayloadHash: []byte{1}})
	mustOutcome(t, "another payload hash", a, err, Conflict)
	a, err = c.Complete(ctx, CompleteRequest{Scope: sc, Key: "o-1", OwnerToken: own.OwnerToken, Result: []byte(`{"id":7}`)})
	mustOutcome(t, "complete", a, err, Completed)
	if string(a.Result) != `{"id":7}` || a.State != StateCompleted {
		t.Fatalf("COMPLETED: %+v", a)
	}
	a, err = c.Complete(ctx, CompleteRequest{Scope: sc, Key: "o-1", OwnerToken: own.OwnerToken, Result: []byte(`other`)})
	mustOutcome(t, "complete again", a, err, Completed)
	if !a.Retry || string(a.Result) != `{"id":7}` {
		t.Fatalf("COMPLETED again: %+v", a)
	}
	a, err = other.Claim(ctx, ClaimRequest{Scope: sc, Key: "o-1", Idempotent: true, PayloadHash: hash})
	mustOutcome(t, "claim of a completed key", a, err, Duplicate)
	if string(a.Result) != `{"id":7}` || a.OwnerToken != "" {
		t.Fatalf("DUPLICATE: %+v", a)
	}
	a, err = c.Release(ctx, ReleaseRequest{Scope: sc, Key: "o-1", OwnerToken: own.OwnerToken})
	mustOutcome(t, "release of a completed key", a, err, Conflict)

	// Release, takeover, and the old token fenced.
	a, err = c.Claim(ctx, ClaimRequest{Scope: sc, Key: "o-2", Idempotent: true})
	own = mustOutcome(t, "claim o-2", a, err, Accepted)
	a, err = c.Release(ctx, ReleaseRequest{Scope: sc, Key: "o-2", OwnerToken: own.OwnerToken, Error: "try later"})
	mustOutcome(t, "release", a, err, Released)
	if a.State != StateReleased {
		t.Fatalf("RELEASED: %+v", a)
	}
	a, err = other.Claim(ctx, ClaimRequest{Scope: sc, Key: "o-2", Idempotent: true})
	taker := mustOutcome(t, "takeover after release", a, err, Accepted)
	if taker.OwnerAttempt != 2 || taker.OwnerToken == own.OwnerToken {
		t.Fatalf("takeover: %+v (old token %s)", taker, own.OwnerToken)
	}
	a, err = c.Complete(ctx, CompleteRequest{Scope: sc, Key: "o-2", OwnerToken: own.OwnerToken, Result: []byte("late")})
	mustOutcome(t, "complete with the old token", a, err, NotOwner)
	a, err = c.Release(ctx, ReleaseRequest{Scope: sc, Key: "o-2", OwnerToken: own.OwnerToken})
	mustOutcome(t, "release with the old token", a, err, NotOwner)

	// A terminal release: FAILED for good.
	a, err = c.Claim(ctx, ClaimRequest{Scope: sc, Key: "o-3", Idempotent: true})
	own = mustOutcome(t, "claim o-3", a, err, Accepted)
	a, err = c.Release(ctx, ReleaseRequest{Scope: sc, Key: "o-3", OwnerToken: own.OwnerToken, Terminal: true, Error: "card declined"})
	mustOutcome(t, "terminal release", a, err, Failed)
	a, err = other.Claim(ctx, ClaimRequest{Scope: sc, Key: "o-3", Idempotent: true})
	mustOutcome(t, "claim of a failed key", a, err, Failed)
	if a.StoredError != "card declined" || a.State != StateFailed {
		t.Fatalf("FAILED: %+v", a)
	}

	// Complete of nothing, and of a nonce.
	a, err = c.Complete(ctx, CompleteRequest{Scope: sc, Key: "absent", OwnerToken: "1:1:0"})
	mustOutcome(t, "complete of an absent key", a, err, NotFound)
	a, err = c.Claim(ctx, ClaimRequest{Scope: sc, Key: "nonce"})
	mustOutcome(t, "nonce", a, err, Accepted)
	a, err = c.Complete(ctx, CompleteRequest{Scope: sc, Key: "nonce", OwnerToken: "1:1:0"})
	mustOutcome(t, "complete of a nonce", a, err, Conflict)
}

func TestStatus(t *testing.T) {
	tc := cluster(t)
	tc.ctl(t, map[string]interface{}{"op": "wait_leader"})
	c := tc.client(t)
	ctx := ctxFor(t, 20*time.Second)
	leaders := 0
	ids := map[string]bool{}
	for _, u := range tc.urls {
		s, err := c.Status(ctx, u)
		if err != nil {
			t.Fatalf("status %s: %v", u, err)
		}
		if s.Outcome != OK || s.Term == 0 || s.AppliedIndex == 0 || len(s.Members) != 3 || len(s.ConfigVoters) != 3 || s.NodeID == "" {
			t.Fatalf("status %s: %+v", u, s)
		}
		if s.Role == RoleLeader {
			leaders++
		}
		ids[s.NodeID] = true
	}
	if leaders != 1 || len(ids) != 3 {
		t.Fatalf("%d leaders, %d node ids", leaders, len(ids))
	}
	if s, err := c.Status(ctx, ""); err != nil || s.Outcome != OK {
		t.Fatalf("status of any node: %+v %v", s, err)
	}
}

func TestClaimBatch(t *testing.T) {
	tc := cluster(t)
	sc := scope(t)
	ctx := ctxFor(t, 30*time.Second)
	c := tc.client(t)
	items := []ClaimRequest{
		{Scope: sc, Key: "b1", TTL: time.Hour},
		{Scope: sc, Key: "b1", TTL: time.Hour}, // the same key again: REPLAYED
		{Scope: sc, Key: "b2", Idempotent: true, PayloadHash: []byte{7}},
		{Scope: sc, Key: "b3", TTL: 1000 * time.Hour}, // past max_ttl: this item alone refused
		{Scope: sc, Key: "b4", MaxUses: 2},
		{Scope: sc, Key: "b4", MaxUses: 2},
		{Scope: sc, Key: "b4", MaxUses: 2},
	}
	res, err := c.ClaimBatch(ctx, items)
	if err != nil || len(res) != len(items) {
		t.Fatalf("batch: %v, %d results", err, len(res))
	}
	want := []Outcome{Accepted, Replayed, Accepted, "", Accepted, Accepted, Replayed}
	for i, r := range res {
		if !isHex(r.RequestID, 32) {
			t.Fatalf("item %d: request id %q", i, r.RequestID)
		}
		if want[i] == "" {
			continue
		}
		if r.Err != nil || r.Answer == nil || r.Answer.Outcome != want[i] || r.Answer.RequestID != r.RequestID {
			t.Fatalf("item %d: want %s, got %+v (err %v)", i, want[i], r.Answer, r.Err)
		}
	}
	if res[1].Answer.FirstRequestID != res[0].RequestID || res[1].Answer.AttemptsTotal != 1 {
		t.Fatalf("REPLAYED in the batch: %+v", res[1].Answer)
	}
	if res[2].Answer.OwnerToken == "" || res[2].Answer.Kind != Idempotent {
		t.Fatalf("idempotent item: %+v", res[2].Answer)
	}
	var e *Error
	if res[3].Answer != nil || !errors.As(res[3].Err, &e) || !errors.Is(e, ErrInvalidArgument) || e.Kind != Definite ||
		e.Applied != "false" || e.RequestID != res[3].RequestID {
		t.Fatalf("item 3: want its own INVALID_ARGUMENT, got %+v %v", res[3].Answer, res[3].Err)
	}
	if a := res[5].Answer; a.MaxUses != 2 || a.Uses != 2 || a.UsesLeft != 0 || res[4].Answer.Uses != 1 {
		t.Fatalf("2-use nonce in a batch: %+v then %+v", res[4].Answer, a)
	}
	// The item was refused alone: the rest is in the table.
	a, err := c.Lookup(ctx, sc, "b3")
	mustOutcome(t, "lookup of the refused item", a, err, NotFound)

	// The same batch again with its request ids (a retry after an unknown
	// outcome): the accepted items are ACCEPTED retry, nothing counted.
	for i := range items {
		items[i].RequestID = res[i].RequestID
	}
	again, err := c.ClaimBatch(ctx, items)
	if err != nil {
		t.Fatalf("batch again: %v", err)
	}
	for _, i := range []int{0, 2, 4, 5} {
		if a := again[i].Answer; a == nil || a.Outcome != Accepted || !a.Retry {
			t.Fatalf("item %d repeated: want ACCEPTED retry, got %+v (err %v)", i, a, again[i].Err)
		}
	}
	if a := again[5].Answer; a.Uses != 2 {
		t.Fatalf("a repeated use counted again: %+v", a)
	}
}

func TestNUseNonce(t *testing.T) {
	tc := cluster(t)
	sc := scope(t)
	ctx := ctxFor(t, 30*time.Second)
	c := tc.client(t)
	other := tc.client(t, tc.urls[1])

	a, err := c.Claim(ctx, ClaimRequest{Scope: sc, Key: "invite", MaxUses: 2, TTL: time.Hour})
	first := mustOutcome(t, "first use", a, err, Accepted)
	if first.MaxUses != 2 || first.Uses != 1 || first.UsesLeft != 1 || first.Kind != Nonce {
		t.Fatalf("first use: %+v", first)
	}
	a, err = other.Claim(ctx, ClaimRequest{Scope: sc, Key: "invite", MaxUses: 2, TTL: time.Hour})
	mustOutcome(t, "second use", a, err, Accepted)
	if a.Retry || a.MaxUses != 2 || a.Uses != 2 || a.UsesLeft != 0 {
		t.Fatalf("second use: %+v", a)
	}
	a, err = c.Claim(ctx, ClaimRequest{Scope: sc, Key: "invite", MaxUses: 2, TTL: time.Hour})
	mustOutcome(t, "third use", a, err, Replayed)
	if a.FirstRequestID != first.RequestID || a.Uses != 2 || a.UsesLeft != 0 {
		t.Fatalf("REPLAYED: %+v", a)
	}
	// The first use's retry, however late: ACCEPTED retry, not counted.
	a, err = other.Claim(ctx, ClaimRequest{Scope: sc, Key: "invite", MaxUses: 2, TTL: time.Hour, RequestID: first.RequestID})
	mustOutcome(t, "retry of the first use", a, err, Accepted)
	if !a.Retry || a.Uses != 2 {
		t.Fatalf("retry: %+v", a)
	}
	// The first claim fixed max_uses.
	a, err = c.Claim(ctx, ClaimRequest{Scope: sc, Key: "invite", MaxUses: 3, TTL: time.Hour})
	mustOutcome(t, "another max_uses", a, err, Conflict)
	a, err = c.Lookup(ctx, sc, "invite")
	mustOutcome(t, "lookup", a, err, Found)
	if a.MaxUses != 2 || a.Uses != 2 || a.UsesLeft != 0 {
		t.Fatalf("FOUND: %+v", a)
	}
	// Refused here, before the network: the cluster never sees it.
	_, err = c.Claim(ctx, ClaimRequest{Scope: sc, Key: "bad", MaxUses: MaxUses + 1})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalidArgument) || e.Node != "" || !strings.Contains(e.Message, "1..64") {
		t.Fatalf("max uses 65: want a local INVALID_ARGUMENT, got %v", err)
	}
	a, err = c.Lookup(ctx, sc, "bad")
	mustOutcome(t, "lookup of the refused claim", a, err, NotFound)
}

func TestSlidingRetention(t *testing.T) {
	tc := cluster(t)
	sc := scope(t)
	ctx := ctxFor(t, 30*time.Second)
	c := tc.client(t)
	ttl := time.Hour
	for _, sliding := range []bool{true, false} {
		key := fmt.Sprintf("slide-%v", sliding)
		a, err := c.Claim(ctx, ClaimRequest{Scope: sc, Key: key, Idempotent: true, TTL: ttl, Sliding: sliding})
		own := mustOutcome(t, key+": claim", a, err, Accepted)
		if own.Sliding != sliding {
			t.Fatalf("%s: ACCEPTED sliding %v: %+v", key, own.Sliding, own)
		}
		a, err = c.Complete(ctx, CompleteRequest{Scope: sc, Key: key, OwnerToken: own.OwnerToken, Result: []byte("r")})
		mustOutcome(t, key+": complete", a, err, Completed)
		time.Sleep(20 * time.Millisecond) // the log time moves on
		a, err = c.Claim(ctx, ClaimRequest{Scope: sc, Key: key, Idempotent: true, TTL: ttl})
		dup := mustOutcome(t, key+": claim again", a, err, Duplicate)
		if dup.Sliding != sliding || dup.LogTimeMS <= own.LogTimeMS {
			t.Fatalf("%s: DUPLICATE: %+v (first %+v)", key, dup, own)
		}
		moved := dup.ExpiresMS == dup.LogTimeMS+uint64(ttl.Milliseconds()) && dup.ExpiresMS > own.ExpiresMS
		if sliding != moved || (!sliding && dup.ExpiresMS != own.ExpiresMS) {
			t.Fatalf("%s: expiry %d at the claim (log time %d), %d at the DUPLICATE (log time %d)",
				key, own.ExpiresMS, own.LogTimeMS, dup.ExpiresMS, dup.LogTimeMS)
		}
	}
}

func TestLookupServedBy(t *testing.T) {
	tc := cluster(t)
	sc := scope(t)
	ctx := ctxFor(t, 30*time.Second)
	c := tc.client(t)
	s, err := c.Status(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	members := map[string]bool{}
	for _, m := range s.Members {
		members[m.ID] = true
	}
	a, err := c.Claim(ctx, ClaimRequest{Scope: sc, Key: "k"})
	mustOutcome(t, "claim", a, err, Accepted)
	servers := map[string]bool{}
	for _, u := range tc.urls {
		a, err := tc.client(t, u).Lookup(ctx, sc, "k")
		mustOutcome(t, "lookup at "+u, a, err, Found)
		// Any node reads, after a read barrier: the one asked.
		if !members[a.ServedBy] || a.ServedBy != a.NodeID {
			t.Fatalf("lookup at %s: served_by %q, node_id %q, members %v", u, a.ServedBy, a.NodeID, members)
		}
		servers[a.ServedBy] = true
	}
	if len(servers) != len(tc.urls) {
		t.Fatalf("served by %v: want each node asked", servers)
	}
}

// A result type of Do: serialized as JSON by complete, decoded from a
// DUPLICATE.
type charge struct {
	ID     int    `json:"id"`
	Amount string `json:"amount"`
}

func TestDo(t *testing.T) {
	tc := cluster(t)
	sc := scope(t)
	c := tc.client(t)
	ctx := ctxFor(t, 60*time.Second)

	runs := 0
	work := func(context.Context) (charge, error) {
		runs++
		return charge{ID: 42, Amount: "9.99"}, nil
	}
	v, err := Do(ctx, c, sc, "pay-1", work, nil)
	if err != nil || v != (charge{42, "9.99"}) || runs != 1 {
		t.Fatalf("first Do: %+v %v (runs %d)", v, err, runs)
	}
	v, err = Do(ctx, tc.client(t, tc.urls[1]), sc, "pay-1", work, nil)
	if err != nil || v != (charge{42, "9.99"}) || runs != 1 {
		t.Fatalf("second Do: %+v %v (runs %d): DUPLICATE must not run fn", v, err, runs)
	}

	// fn fails, retryable: released; the next Do runs it again.
	boom := errors.New("gateway timeout")
	_, err = Do(ctx, c, sc, "pay-2", func(context.Context) (charge, error) { return charge{}, boom }, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("failing fn: %v", err)
	}
	a, lerr := c.Lookup(ctx, sc, "pay-2")
	if lerr != nil || a.State != StateReleased {
		t.Fatalf("after a retryable failure: %+v %v", a, lerr)
	}
	v, err = Do(ctx, c, sc, "pay-2", work, nil)
	if err != nil || v.ID != 42 || runs != 2 {
		t.Fatalf("Do after a release: %+v %v (runs %d)", v, err, runs)
	}

	// fn fails for good: every later Do gets ErrKeyFailed, fn not run.
	_, err = Do(ctx, c, sc, "pay-3", func(context.Context) (charge, error) {
		return charge{}, Terminal(errors.New("card declined"))
	}, nil)
	if err == nil || err.Error() != "card declined" {
		t.Fatalf("terminal fn: %v", err)
	}
	_, err = Do(ctx, c, sc, "pay-3", work, nil)
	var oe *OutcomeError
	if !errors.Is(err, ErrKeyFailed) || !errors.As(err, &oe) || oe.Answer.StoredError != "card declined" || runs != 2 {
		t.Fatalf("Do of a failed key: %v (runs %d)", err, runs)
	}
	// The caller decides what is terminal.
	_, err = Do(ctx, c, sc, "pay-4", func(context.Context) (charge, error) { return charge{}, boom },
		&DoOptions{IsTerminal: func(err error) bool { return errors.Is(err, boom) }})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if a, _ := c.Lookup(ctx, sc, "pay-4"); a == nil || a.State != StateFailed || a.StoredError != boom.Error() {
		t.Fatalf("IsTerminal: %+v", a)
	}

	// Another payload hash: CONFLICT.
	_, err = Do(ctx, c, sc, "pay-1", work, &DoOptions{PayloadHash: []byte("other")})
	if !errors.Is(err, ErrConflict) || runs != 2 {
		t.Fatalf("Do with another hash: %v", err)
	}

	// IN_PROGRESS until the deadline: ErrInProgress, fn not run.
	hold, err := c.Claim(ctx, ClaimRequest{Scope: sc, Key: "pay-5", Idempotent: true, Lease: 30 * time.Second})
	mustOutcome(t, "hold pay-5", hold, err, Accepted)
	short, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	_, err = Do(short, c, sc, "pay-5", work, nil)
	cancel()
	if !errors.Is(err, ErrInProgress) || runs != 2 {
		t.Fatalf("Do of a held key: %v", err)
	}
	// ... and it waits for the owner when the deadline allows.
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = c.Complete(ctx, CompleteRequest{Scope: sc, Key: "pay-5", OwnerToken: hold.OwnerToken, Result: []byte(`{"id":5,"amount":"1"}`)})
	}()
	v, err = Do(ctx, c, sc, "pay-5", work, &DoOptions{MaxWait: 100 * time.Millisecond})
	if err != nil || v != (charge{5, "1"}) || runs != 2 {
		t.Fatalf("Do that waited for the owner: %+v %v", v, err)
	}

	// A result too big to store: the key is given up, not left PENDING.
	_, err = Do(ctx, c, sc, "pay-7", func(context.Context) (string, error) { return strings.Repeat("x", MaxResult), nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot be stored") {
		t.Fatalf("oversized result: %v", err)
	}
	if a, _ := c.Lookup(ctx, sc, "pay-7"); a == nil || a.State != StateReleased {
		t.Fatalf("after an oversized result: %+v", a)
	}

	// A panic in fn releases the key and keeps panicking.
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic was swallowed")
			}
		}()
		_, _ = Do(ctx, c, sc, "pay-6", func(context.Context) (charge, error) { panic("bug") }, nil)
	}()
	if a, _ := c.Lookup(ctx, sc, "pay-6"); a == nil || a.State != StateReleased {
		t.Fatalf("after a panic: %+v", a)
	}
}

func TestDoFencedWhenAnotherTookOver(t *testing.T) {
	tc := cluster(t)
	sc := scope(t)
	c := tc.client(t)
	taker := tc.client(t, tc.urls[1])
	ctx := ctxFor(t, 60*time.Second)

	tookOver := make(chan *Answer, 1)
	ran := 0
	_, err := Do(ctx, c, sc, "job", func(ctx context.Context) (string, error) {
		ran++
		// While this owner works past its lease, another caller takes
		// the key over.
		for {
			a, err := taker.Claim(ctx, ClaimRequest{Scope: sc, Key: "job", Idempotent: true, Lease: 30 * time.Second})
			if err != nil {
				return "", err
			}
			if a.Outcome == Accepted {
				tookOver <- a
				return "late result", nil
			}
			time.Sleep(100 * time.Millisecond)
		}
	}, &DoOptions{Lease: time.Second})
	var oe *OutcomeError
	if !errors.Is(err, ErrFenced) || !errors.As(err, &oe) || oe.Op != "complete" || oe.Outcome != NotOwner || ran != 1 {
		t.Fatalf("want ErrFenced from complete, got %v", err)
	}
	tk := <-tookOver
	if tk.OwnerAttempt != 2 {
		t.Fatalf("takeover: %+v", tk)
	}
	// The late owner overwrote nothing: the new owner's record is intact.
	a, err := c.Lookup(ctx, sc, "job")
	if err != nil || a.State != StatePending || a.OwnerToken != tk.OwnerToken || a.Result != nil {
		t.Fatalf("after the fenced complete: %+v %v", a, err)
	}
}

// The helper process of TestDoRacingProcesses: TestMain runs it instead
// of the tests when ONCE_GO_HELPER is set.
func racingHelper() int {
	nodes := strings.Split(os.Getenv("ONCE_TEST_HTTP"), ",")
	c, err := New(Config{Nodes: nodes, Timeout: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	var start int64
	fmt.Sscan(os.Getenv("ONCE_GO_HELPER_START"), &start)
	time.Sleep(time.Until(time.UnixMilli(start)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := Do(ctx, c, os.Getenv("ONCE_GO_HELPER_SCOPE"), "race", func(context.Context) (string, error) {
		f, err := os.OpenFile(os.Getenv("ONCE_GO_HELPER_LOG"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(f, "%d\n", os.Getpid())
		f.Close()
		time.Sleep(800 * time.Millisecond) // the other process meets IN_PROGRESS
		return fmt.Sprintf("ran by %d", os.Getpid()), nil
	}, &DoOptions{MaxWait: 200 * time.Millisecond})
	out, _ := json.Marshal(map[string]string{"result": v, "error": fmt.Sprint(err)})
	fmt.Println(string(out))
	if err != nil {
		return 1
	}
	return 0
}

func TestMain(m *testing.M) {
	if os.Getenv("ONCE_GO_HELPER") == "race" {
		os.Exit(racingHelper())
	}
	os.Exit(m.Run())
}

func TestDoRacingProcesses(t *testing.T) {
	tc := cluster(t)
	tc.plainOnly(t)
	sc := scope(t)
	log := filepath.Join(t.TempDir(), "runs")
	start := time.Now().Add(500 * time.Millisecond).UnixMilli()
	type res struct {
		out []byte
		err error
	}
	results := make([]res, 2)
	var wg sync.WaitGroup
	for i := range results {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "ONCE_GO_HELPER=race", "ONCE_GO_HELPER_SCOPE="+sc,
			"ONCE_GO_HELPER_LOG="+log, fmt.Sprintf("ONCE_GO_HELPER_START=%d", start))
		wg.Add(1)
		go func(i int, cmd *exec.Cmd) {
			defer wg.Done()
			out, err := cmd.Output()
			results[i] = res{out, err}
		}(i, cmd)
	}
	wg.Wait()
	var got []string
	for i, r := range results {
		var m map[string]string
		if r.err != nil || json.Unmarshal(r.out, &m) != nil || m["error"] != "<nil>" {
			t.Fatalf("helper %d: %v: %s", i, r.err, r.out)
		}
		got = append(got, m["result"])
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != 1 {
		t.Fatalf("the work ran %d times (pids %v), want exactly once", len(lines), lines)
	}
	want := "ran by " + lines[0]
	if got[0] != want || got[1] != want {
		t.Fatalf("results %q, want both %q", got, want)
	}
}

func TestTLSTenant(t *testing.T) {
	tc := cluster(t)
	if !tc.tls {
		t.Skip("runs against the TLS cluster (clients/go/test's second part)")
	}
	ctx := ctxFor(t, 30*time.Second)
	tenant, err := New(Config{Nodes: tc.urls, TLS: tlsFiles(t, "ONCE_TEST_TENANT_CERT", "ONCE_TEST_TENANT_KEY")})
	if err != nil {
		t.Fatal(err)
	}
	defer tenant.Close()
	key := "evt-" + NewRequestID()[:8]
	a, err := tenant.Claim(ctx, ClaimRequest{Scope: "tenant-a", Key: key})
	mustOutcome(t, "tenant claim in its scope", a, err, Accepted)
	a, err = tenant.Lookup(ctx, "tenant-a", key)
	mustOutcome(t, "tenant lookup in its scope", a, err, Found)
	v, err := Do(ctx, tenant, "tenant-a", "do-"+key, func(context.Context) (int, error) { return 7, nil }, nil)
	if err != nil || v != 7 {
		t.Fatalf("tenant Do: %v %v", v, err)
	}
	for _, call := range []func() error{
		func() error { _, err := tenant.Claim(ctx, ClaimRequest{Scope: "tenant-b", Key: key}); return err },
		func() error { _, err := tenant.Lookup(ctx, "tenant-b", key); return err },
	} {
		err := call()
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrPermissionDenied) || e.Kind != Definite || e.HTTPStatus != 403 || e.Applied != "false" {
			t.Fatalf("another scope: want PERMISSION_DENIED, got %#v", err)
		}
	}
	// The admin may claim in any scope.
	a, err = tc.client(t).Claim(ctx, ClaimRequest{Scope: "tenant-b", Key: key})
	mustOutcome(t, "admin claim", a, err, Accepted)
	// No client certificate: refused too.
	anon, _ := New(Config{Nodes: tc.urls, TLS: tlsFiles(t, "", "")})
	defer anon.Close()
	_, err = anon.Claim(ctx, ClaimRequest{Scope: "tenant-a", Key: key + "-anon"})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrPermissionDenied) || e.Kind != Definite || e.HTTPStatus != 403 {
		t.Fatalf("without a certificate: want PERMISSION_DENIED, got %v", err)
	}
	// A server certificate from another CA: never trusted.
	wrong, _ := New(Config{Nodes: tc.urls, TLS: &tls.Config{MinVersion: tls.VersionTLS13}})
	defer wrong.Close()
	_, err = wrong.Lookup(ctxFor(t, time.Second), "tenant-a", key)
	if !errors.Is(err, ErrNotApplied) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an unknown CA: %v", err)
	}
}

// --- the tests that stop nodes or re-create the cluster: last ---------------

func TestPausedNodeDoesNotTakeTheDeadline(t *testing.T) {
	tc := cluster(t)
	tc.plainOnly(t)
	tc.ctl(t, map[string]interface{}{"op": "wait_leader"})
	f := tc.ctl(t, map[string]interface{}{"op": "pause", "node": "follower"})["node"].(string)
	defer tc.ctl(t, map[string]interface{}{"op": "resume", "node": f})
	nodes := []string{f}
	for _, u := range tc.urls {
		if u != f {
			nodes = append(nodes, u)
		}
	}
	c := tc.client(t, nodes...)
	ctx := ctxFor(t, 6*time.Second)
	t0 := time.Now()
	a, err := c.Claim(ctx, ClaimRequest{Scope: scope(t), Key: "k"})
	mustOutcome(t, "claim past a paused node", a, err, Accepted)
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("took %v: the paused node took the deadline", d)
	}
}

// proxyDroppingAnswer forwards one node's port and, when the node's answer
// starts to come back, calls onAnswer (which kills the node) and drops
// the answer: the call applied, its caller never hears of it.
func proxyDroppingAnswer(t *testing.T, target string, onAnswer func()) string {
	u, _ := url.Parse(target)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var once sync.Once
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func(conn net.Conn) {
				defer conn.Close()
				up, err := net.Dial("tcp", u.Host)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, conn) }()
				buf := make([]byte, 1)
				if _, err := up.Read(buf); err != nil {
					return
				}
				once.Do(func() {
					onAnswer()
					ln.Close()
				})
			}(conn)
		}
	}()
	return "http://" + ln.Addr().String()
}

func TestLeaderKilledMidCall(t *testing.T) {
	tc := cluster(t)
	tc.plainOnly(t)
	leader := tc.ctl(t, map[string]interface{}{"op": "wait_leader"})["leader"].(string)
	var killed atomic.Bool
	var killErr error
	proxy := proxyDroppingAnswer(t, leader, func() {
		if _, killErr = tc.ctlErr(map[string]interface{}{"op": "kill", "node": leader}); killErr == nil {
			killed.Store(true)
		}
	})
	defer func() {
		if killed.Load() {
			tc.ctl(t, map[string]interface{}{"op": "start", "node": leader})
			tc.ctl(t, map[string]interface{}{"op": "wait_leader"})
		}
	}()
	nodes := []string{proxy}
	for _, u := range tc.urls {
		if u != leader {
			nodes = append(nodes, u)
		}
	}
	c := tc.client(t, nodes...)
	sc := scope(t)
	a, err := c.Claim(ctxFor(t, 20*time.Second), ClaimRequest{Scope: sc, Key: "k", TTL: time.Hour})
	if !killed.Load() {
		t.Fatalf("the leader was not killed mid-call: %+v %v (%v)", a, err, killErr)
	}
	mustOutcome(t, "claim whose leader died before answering", a, err, Accepted)
	if !a.Retry || a.FirstRequestID != a.RequestID {
		t.Fatalf("want ACCEPTED retry=true with the first request id, got %+v", a)
	}
	// Another call is another request id: REPLAYED.
	b, err := c.Claim(ctxFor(t, 20*time.Second), ClaimRequest{Scope: sc, Key: "k", TTL: time.Hour})
	mustOutcome(t, "a new call", b, err, Replayed)
}

func TestPinRefusesARecreatedCluster(t *testing.T) {
	tc := cluster(t)
	tc.plainOnly(t)
	c := tc.client(t)
	ctx := ctxFor(t, 20*time.Second)
	sc := scope(t)
	a, err := c.Claim(ctx, ClaimRequest{Scope: sc, Key: "before"})
	mustOutcome(t, "claim before", a, err, Accepted)
	old := c.ClusterID()
	info := tc.ctl(t, map[string]interface{}{"op": "recreate"})
	if info["cluster_id"] == old {
		t.Fatalf("recreate kept the cluster id %s", old)
	}
	_, err = c.Claim(ctxFor(t, 20*time.Second), ClaimRequest{Scope: sc, Key: "before"})
	var e *Error
	// The write carried the pin: the new cluster refused it before
	// proposing it, so it is not applied anywhere.
	if !errors.As(err, &e) || !errors.Is(err, ErrClusterMismatch) || e.Kind != Definite || e.Applied != "false" ||
		errors.Is(err, ErrUnknown) || !strings.Contains(e.Message, old) || e.ClusterID != info["cluster_id"] {
		t.Fatalf("the re-created cluster: want a cluster id mismatch, not applied, got %#v", err)
	}
	_, err = c.Lookup(ctxFor(t, 20*time.Second), sc, "before")
	if !errors.Is(err, ErrClusterMismatch) {
		t.Fatalf("lookup on the re-created cluster: %v", err)
	}
	// A new client pins the new cluster (which forgot everything), and
	// finds no trace of the refused claim.
	n := tc.client(t)
	a, err = n.Lookup(ctxFor(t, 20*time.Second), sc, "before")
	mustOutcome(t, "lookup of the refused claim's key on the new cluster", a, err, NotFound)
	a, err = n.Claim(ctxFor(t, 20*time.Second), ClaimRequest{Scope: sc, Key: "after"})
	mustOutcome(t, "a new client's claim", a, err, Accepted)
	if n.ClusterID() == old {
		t.Fatal("the new client pinned the old id")
	}
}

// The README's example (example/main.go, which the README quotes) run
// twice against the cluster: ACCEPTED then REPLAYED, and the same charge.
func TestReadmeExample(t *testing.T) {
	tc := cluster(t)
	tc.plainOnly(t)
	bin := filepath.Join(t.TempDir(), "example")
	if out, err := exec.Command("go", "build", "-o", bin, "./example").CombinedOutput(); err != nil {
		t.Fatalf("go build ./example: %v\n%s", err, out)
	}
	for i, want := range []string{"claim: ACCEPTED\ncharge: charge-7 <nil>\n", "claim: REPLAYED\ncharge: charge-7 <nil>\n"} {
		out, err := exec.Command(bin, tc.urls...).CombinedOutput()
		if err != nil || string(out) != want {
			t.Fatalf("run %d: %v\n%s\nwant\n%s", i+1, err, out, want)
		}
	}
}
