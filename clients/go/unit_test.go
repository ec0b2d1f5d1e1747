package once

// Tests that need no cluster: the version, arguments refused before any
// network call, the decoding of every answer field from recorded answers,
// and the request-id, node-selection, pin and deadline rules against fake
// nodes (httptest servers on loopback).

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestVersionIsTheRepositorys(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "configure.ac"))
	if err != nil {
		t.Fatalf("configure.ac: %v", err)
	}
	m := regexp.MustCompile(`AC_INIT\(\[once\],\s*\[([^\]]+)\]`).FindSubmatch(b)
	if m == nil {
		t.Fatal("configure.ac: no AC_INIT([once], [VERSION])")
	}
	if string(m[1]) != Version {
		t.Fatalf("Version %q, configure.ac's AC_INIT says %q", Version, m[1])
	}
}

// countingServer counts every connection and request it gets.

func countingServer(t *testing.T) (*httptest.Server, *int64) {
	var n int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt64(&n, 1)
		w.WriteHeader(500)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			atomic.AddInt64(&n, 1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestBadArgumentsRefusedBeforeAnyNetworkCall(t *testing.T) {
	srv, hits := countingServer(t)
	c, err := New(Config{Nodes: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	long := func(n int) string { return strings.Repeat("x", n) }
	tok := "1:2:0"
	claims := map[string]ClaimRequest{
		"empty scope":             {Key: "k"},
		"empty key":               {Scope: "s"},
		"scope 129 bytes":         {Scope: long(129), Key: "k"},
		"key 257 bytes":           {Scope: "s", Key: long(257)},
		"key not UTF-8":           {Scope: "s", Key: "\xff\xfe"},
		"scope with NUL":          {Scope: "a\x00b", Key: "k"},
		"request id short":        {Scope: "s", Key: "k", RequestID: "abcd"},
		"request id not hex":      {Scope: "s", Key: "k", RequestID: strings.Repeat("g", 32)},
		"execution id 129":        {Scope: "s", Key: "k", ExecutionID: long(129)},
		"negative ttl":            {Scope: "s", Key: "k", TTL: -time.Second},
		"ttl under 1ms":           {Scope: "s", Key: "k", TTL: time.Microsecond},
		"ts without window":       {Scope: "s", Key: "k", TS: time.Now()},
		"window without ts":       {Scope: "s", Key: "k", Window: time.Minute},
		"ts before 1970":          {Scope: "s", Key: "k", TS: time.Unix(-10, 0), Window: time.Minute},
		"payload hash on nonce":   {Scope: "s", Key: "k", PayloadHash: []byte{1}},
		"lease on nonce":          {Scope: "s", Key: "k", Lease: time.Second},
		"payload hash 65 bytes":   {Scope: "s", Key: "k", Idempotent: true, PayloadHash: make([]byte, 65)},
		"negative lease":          {Scope: "s", Key: "k", Idempotent: true, Lease: -1},
		"negative window with ts": {Scope: "s", Key: "k", TS: time.Now(), Window: -time.Second},
		"max uses 65":             {Scope: "s", Key: "k", MaxUses: 65},
		"max uses negative":       {Scope: "s", Key: "k", MaxUses: -1},
		"max uses on idempotent":  {Scope: "s", Key: "k", Idempotent: true, MaxUses: 2},
		"sliding on a nonce":      {Scope: "s", Key: "k", TTL: time.Hour, Sliding: true},
		"sliding without ttl":     {Scope: "s", Key: "k", Idempotent: true, Sliding: true},
	}
	check := func(name string, err error) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: want *Error, got %v", name, err)
			return
		}
		if !errors.Is(err, ErrInvalidArgument) || !errors.Is(err, ErrDefinite) || e.Applied != "false" || e.Node != "" {
			t.Errorf("%s: want a local INVALID_ARGUMENT, Definite, applied false; got %+v", name, e)
		}
	}
	for name, r := range claims {
		a, err := c.Claim(ctx, r)
		if a != nil {
			t.Errorf("%s: an answer %+v", name, a)
		}
		check("claim: "+name, err)
	}
	completes := map[string]CompleteRequest{
		"no token":      {Scope: "s", Key: "k"},
		"bad token":     {Scope: "s", Key: "k", OwnerToken: "1:2"},
		"token not num": {Scope: "s", Key: "k", OwnerToken: "a:b:c"},
		"result 64KiB+": {Scope: "s", Key: "k", OwnerToken: tok, Result: make([]byte, MaxResult+1)},
		"empty key":     {Scope: "s", OwnerToken: tok},
		"bad id":        {Scope: "s", Key: "k", OwnerToken: tok, RequestID: "x"},
	}
	for name, r := range completes {
		_, err := c.Complete(ctx, r)
		check("complete: "+name, err)
	}
	releases := map[string]ReleaseRequest{
		"no token":       {Scope: "s", Key: "k"},
		"error 1025":     {Scope: "s", Key: "k", OwnerToken: tok, Error: long(1025)},
		"error not utf8": {Scope: "s", Key: "k", OwnerToken: tok, Error: "\xc3"},
		"long scope":     {Scope: long(129), Key: "k", OwnerToken: tok},
	}
	for name, r := range releases {
		_, err := c.Release(ctx, r)
		check("release: "+name, err)
	}
	batches := map[string][]ClaimRequest{
		"no items":       nil,
		"4097 items":     make([]ClaimRequest, MaxBatch+1),
		"a bad max uses": {{Scope: "s", Key: "k"}, {Scope: "s", Key: "k", MaxUses: 100}},
		"over 1 MiB":     bigBatch(),
	}
	for name, items := range batches {
		res, err := c.ClaimBatch(ctx, items)
		if res != nil {
			t.Errorf("batch %s: results %+v", name, res)
		}
		check("batch: "+name, err)
	}
	if _, err := c.ClaimBatch(ctx, batches["a bad max uses"]); err == nil ||
		!strings.Contains(err.Error(), "items[1]: max uses: 100, want 1..64") {
		t.Errorf("batch: the error should name the item and the bound: %v", err)
	}
	_, err = c.Lookup(ctx, "s", "")
	check("lookup: empty key", err)
	_, err = c.Lookup(ctx, "", "k")
	check("lookup: empty scope", err)
	_, err = c.Status(ctx, "ftp://x:1")
	check("status: bad node", err)
	var noCtx context.Context // a nil context is refused, not a panic
	_, err = c.Lookup(noCtx, "s", "k")
	check("lookup: nil context", err)
	_, err = Do(ctx, c, "s", "", func(context.Context) (int, error) { return 1, nil }, nil)
	check("Do: empty key", err)
	_, err = Do[int](ctx, c, "s", "k", nil, nil)
	check("Do: nil fn", err)

	if n := atomic.LoadInt64(hits); n != 0 {
		t.Fatalf("the fake node got %d requests: a bad argument reached the network", n)
	}

	configs := map[string]Config{
		"no nodes":         {},
		"65 nodes":         {Nodes: make([]string, 65)},
		"bad scheme":       {Nodes: []string{"ftp://127.0.0.1:1"}},
		"no port":          {Nodes: []string{"http://127.0.0.1"}},
		"a path":           {Nodes: []string{"http://127.0.0.1:1/v1"}},
		"cluster id short": {Nodes: []string{srv.URL}, ClusterID: "abc"},
		"negative timeout": {Nodes: []string{srv.URL}, Timeout: -1},
		"http with TLS":    {Nodes: []string{"http://127.0.0.1:1"}, TLS: tlsConfigForTest()},
	}
	for name, cfg := range configs {
		c, err := New(cfg)
		if c != nil {
			t.Errorf("New %s: a client", name)
		}
		check("New: "+name, err)
	}
}

// bigBatch: 4,096 valid claims whose JSON passes the 1 MiB body ceiling.
func bigBatch() []ClaimRequest {
	items := make([]ClaimRequest, MaxBatch)
	for i := range items {
		items[i] = ClaimRequest{Scope: strings.Repeat("s", MaxScope), Key: strings.Repeat("k", 200)}
	}
	return items
}

// recorded gives testdata/answers/NAME.
func recorded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "answers", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonTags lists the json names of a struct type's fields.
func jsonTags(typ reflect.Type) []string {
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		tag := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
		if tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

// strictDecode decodes b into v refusing a field v has no place for, so a
// field of the answers that the structs forget fails here. v must have no
// UnmarshalJSON of its own (which would not see the decoder's setting):
// the plain types below.
type (
	plainAnswer  Answer
	plainAttempt Attempt
	plainStatus  StatusAnswer
)

func strictDecode(b []byte, v interface{}) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func TestDecodeEveryAnswerField(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "answers", "*.json"))
	if err != nil || len(files) < 10 {
		t.Fatalf("recorded answers: %v (%d)", err, len(files))
	}
	seen := map[string]bool{}
	seenStatus := map[string]bool{}
	seenAttempt := map[string]bool{}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "batch_") {
			continue // an array: TestDecodeRecordedBatch
		}
		b, _ := os.ReadFile(f)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		base := filepath.Base(f)
		switch {
		case strings.HasPrefix(base, "error_"):
			var e errorAnswer
			if err := strictDecode(b, &e); err != nil {
				t.Errorf("%s: %v", base, err)
			}
			continue
		case strings.Contains(base, "status"):
			var s plainStatus
			if err := strictDecode(b, &s); err != nil {
				t.Errorf("%s: %v", base, err)
			}
			for k := range m {
				seenStatus[k] = true
			}
			continue
		}
		var a plainAnswer
		if err := strictDecode(b, &a); err != nil {
			t.Errorf("%s: %v", base, err)
		}
		for k := range m {
			seen[k] = true
		}
		if raw, ok := m["attempts"]; ok {
			var as []json.RawMessage
			_ = json.Unmarshal(raw, &as)
			for _, rawAt := range as {
				var pa plainAttempt
				if err := strictDecode(rawAt, &pa); err != nil {
					t.Errorf("%s: attempt: %v", base, err)
				}
				var at map[string]json.RawMessage
				_ = json.Unmarshal(rawAt, &at)
				for k := range at {
					seenAttempt[k] = true
				}
			}
		}
	}
	// And the other way: every field of the structs is in some recorded
	// answer, so the values below are checked against real spellings.
	for _, c := range []struct {
		typ  reflect.Type
		seen map[string]bool
	}{{reflect.TypeOf(Answer{}), seen}, {reflect.TypeOf(StatusAnswer{}), seenStatus}, {reflect.TypeOf(Attempt{}), seenAttempt}} {
		for _, tag := range jsonTags(c.typ) {
			if !c.seen[tag] {
				t.Errorf("%s.%s: in no recorded answer", c.typ.Name(), tag)
			}
		}
	}

	var a Answer
	if err := json.Unmarshal(recorded(t, "lookup_found.json"), &a); err != nil {
		t.Fatal(err)
	}
	want := Answer{
		Outcome: Found, LogTimeMS: 1796620685164,
		FirstRequestID: "a812fee788e624c3a373118baebeb590", FirstIndex: 20, FirstTimeMS: 1796620685106,
		AttemptsTotal: 2,
		Attempts: []Attempt{
			{RequestID: "b69a68e4573b7a2e5111653b2a7aedf6", Index: 21, TimeMS: 1796620685150, Outcome: InProgress},
			{RequestID: "d8edc8e24d8e46ee653af21c94598d1a", Index: 23, TimeMS: 1796620685164, Outcome: Duplicate},
		},
		OwnerToken: "1:20:0", OwnerAttempt: 1, Result: []byte(`{"id":7}`),
		Kind: Idempotent, State: StateCompleted, ExpiresMS: 1796707085106, LeaseExpiresMS: 1796620715106,
		ClusterID: "5d65223e44c1cbe19ba6f0518876b395", NodeID: "36d021c4c0e28d70", BootID: "433f063d7edbf885cce78bc0b67eb7ea",
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("lookup_found:\n got %+v\nwant %+v", a, want)
	}

	a = Answer{}
	if err := json.Unmarshal(recorded(t, "handmade_every_field.json"), &a); err != nil {
		t.Fatal(err)
	}
	if !a.Retry || a.RequestID != "00112233445566778899aabbccddeeff" || a.RetryAfterMS != 1234 ||
		a.Reason != "why not" || a.State != StateFailed || a.OwnerAttempt != 2 ||
		!bytes.Equal(a.StoredErrorB64, []byte{0x80}) || a.Result == nil || len(a.Result) != 0 ||
		len(a.Attempts) != 1 || !bytes.Equal(a.Attempts[0].ExecutionIDB64, []byte{0xff}) || !a.Attempts[0].Retry {
		t.Errorf("handmade_every_field: %+v", a)
	}
	tok, err := ParseToken(a.OwnerToken)
	if err != nil || tok != (Token{1, 20, 3}) || tok.String() != "1:20:3" {
		t.Errorf("token %q: %+v %v", a.OwnerToken, tok, err)
	}

	a = Answer{}
	_ = json.Unmarshal(recorded(t, "claim_in_progress.json"), &a)
	if a.Outcome != InProgress || a.RetryAfterMS != 29956 || a.OwnerToken != "" || a.Result != nil {
		t.Errorf("claim_in_progress: %+v", a)
	}
	a = Answer{}
	_ = json.Unmarshal(recorded(t, "claim_failed.json"), &a)
	if a.Outcome != Failed || a.StoredError != "card declined" || a.State != StateFailed {
		t.Errorf("claim_failed: %+v", a)
	}

	var s StatusAnswer
	if err := json.Unmarshal(recorded(t, "status.json"), &s); err != nil {
		t.Fatal(err)
	}
	if s.Outcome != OK || s.Role != RoleFollower || s.MemberRole != MemberVoter || s.Term != 1 ||
		s.CommitIndex != 27 || s.AppliedIndex != 27 || s.AppliedDigest != "f1de54c4e17d731e" ||
		s.Schema != 2 || s.SchemaMax != 2 || s.ConfigIndex != 13 || len(s.ConfigVoters) != 3 ||
		s.Leader != "36d021c4c0e28d70" || s.LeaderAddr != "127.0.0.1:12000" || s.StoreBackend != "uring" ||
		len(s.Members) != 3 || s.Members[1] != (Member{"c491ffef0ca284b7", "127.0.0.1:12051", "127.0.0.1:12001", MemberVoter, false}) ||
		s.NodeID != "637d6eb356c6f96c" {
		t.Errorf("status: %+v", s)
	}
	s = StatusAnswer{}
	_ = json.Unmarshal(recorded(t, "handmade_status_restored.json"), &s)
	if s.RestoredFrom != "0123456789abcdef0123456789abcdef" || s.RestoreTimeMS != 1796620000000 ||
		s.ReplayWindowUntilMS != 1797224800000 || s.RestoreStaleTSMS != 1796620060000 || s.BackupsOpen != 1 ||
		s.NoVoteCutIndex != 26 || s.StateDigest != "00000000deadbeef" || s.Role != RoleLeader || s.Members[0].Role != MemberStandby {
		t.Errorf("status restored: %+v", s)
	}
}

// fakeNode is a node whose answers a test scripts; it records every
// request body.
type fakeNode struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []map[string]interface{}
	answer func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request)
}

func newFake(t *testing.T, answer func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request)) *fakeNode {
	f := &fakeNode{answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]interface{}
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		n := len(f.bodies)
		f.mu.Unlock()
		f.answer(n, body, w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNode) got() []map[string]interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]interface{}(nil), f.bodies...)
}

func writeJSON(w http.ResponseWriter, status int, v map[string]interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

const fakeCluster = "5d65223e44c1cbe19ba6f0518876b395"

func accepted(body map[string]interface{}, retry bool) map[string]interface{} {
	return map[string]interface{}{"outcome": "ACCEPTED", "retry": retry, "request_id": body["request_id"],
		"kind": "NONCE", "state": "SEEN", "cluster_id": fakeCluster, "node_id": "0000000000000001"}
}

// hangUp closes the connection without an answer: the request was sent,
// so its outcome is unknown.
func hangUp(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestRequestIDFreshPerCallSameOnRetry(t *testing.T) {
	// Node A takes the request and hangs up (outcome unknown); node B
	// answers. The retry must carry the first attempt's request id.
	a := newFake(t, func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request) { hangUp(w) })
	b := newFake(t, func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, accepted(body, true))
	})
	c, err := New(Config{Nodes: []string{a.srv.URL, b.srv.URL}, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ans, err := c.Claim(context.Background(), ClaimRequest{Scope: "s", Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	ga, gb := a.got(), b.got()
	if len(ga) != 1 || len(gb) != 1 {
		t.Fatalf("attempts: A %d, B %d; want 1 and 1", len(ga), len(gb))
	}
	rid, _ := ga[0]["request_id"].(string)
	if !isHex(rid, 32) || gb[0]["request_id"] != rid || ans.RequestID != rid {
		t.Fatalf("request ids: A %v, B %v, answer %s", ga[0]["request_id"], gb[0]["request_id"], ans.RequestID)
	}
	// The node's deadline travels with each attempt, within the call's.
	if to, ok := ga[0]["timeout"].(float64); !ok || to < 1 || to > 3000 {
		t.Fatalf("timeout field %v", ga[0]["timeout"])
	}
	// The next call (another one) gets a fresh id.
	if _, err := c.Claim(context.Background(), ClaimRequest{Scope: "s", Key: "k2"}); err != nil {
		t.Fatal(err)
	}
	gb = b.got()
	if len(gb) != 2 || gb[1]["request_id"] == rid || !isHex(gb[1]["request_id"].(string), 32) {
		t.Fatalf("second call's request id %v (first %s)", gb[len(gb)-1]["request_id"], rid)
	}
	// A request id given by the caller is sent as it is.
	given := "00112233445566778899AABBCCDDEEFF"
	if _, err := c.Claim(context.Background(), ClaimRequest{Scope: "s", Key: "k3", RequestID: given}); err != nil {
		t.Fatal(err)
	}
	gb = b.got()
	if gb[len(gb)-1]["request_id"] != strings.ToLower(given) {
		t.Fatalf("given request id sent as %v", gb[len(gb)-1]["request_id"])
	}
}

func TestNotAppliedMovesOnDefiniteStops(t *testing.T) {
	// A: 503 UNAVAILABLE applied false -> B; B: 400 -> final, no C.
	unavailable := func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 503, map[string]interface{}{"error": "UNAVAILABLE", "applied": "false", "leader_hint": "",
			"message": "no leader", "request_id": body["request_id"], "cluster_id": fakeCluster})
	}
	a := newFake(t, unavailable)
	b := newFake(t, func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 400, map[string]interface{}{"error": "INVALID_ARGUMENT", "applied": "false",
			"message": "ttl: above max_ttl", "request_id": body["request_id"], "cluster_id": fakeCluster})
	})
	cnode := newFake(t, unavailable)
	c, _ := New(Config{Nodes: []string{a.srv.URL, b.srv.URL, cnode.srv.URL}, Timeout: 3 * time.Second})
	_, err := c.Claim(context.Background(), ClaimRequest{Scope: "s", Key: "k"})
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusInvalidArgument || e.Kind != Definite || e.Applied != "false" ||
		e.Message != "ttl: above max_ttl" || e.HTTPStatus != 400 || e.Attempts != 2 {
		t.Fatalf("want the node's INVALID_ARGUMENT after 2 attempts, got %#v", err)
	}
	if len(a.got()) != 1 || len(b.got()) != 1 || len(cnode.got()) != 0 {
		t.Fatalf("attempts A %d B %d C %d", len(a.got()), len(b.got()), len(cnode.got()))
	}
	if a.got()[0]["request_id"] != b.got()[0]["request_id"] {
		t.Fatal("the retry of one call changed its request id")
	}
}

func TestUnknownStaysUnknownUntilTheDeadline(t *testing.T) {
	// Every node hangs up after reading: the call may have applied, and
	// the deadline ends it as Unknown, with the request id to retry.
	hang := func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request) { hangUp(w) }
	a, b := newFake(t, hang), newFake(t, hang)
	c, _ := New(Config{Nodes: []string{a.srv.URL, b.srv.URL}})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := c.Claim(ctx, ClaimRequest{Scope: "s", Key: "k"})
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("the call took %v past a 400ms deadline", d)
	}
	var e *Error
	if !errors.As(err, &e) || e.Kind != Unknown || e.Applied != "unknown" || !errors.Is(err, ErrUnknown) ||
		!errors.Is(err, context.DeadlineExceeded) || e.Status != StatusDeadlineExceeded || e.RequestID == "" {
		t.Fatalf("want Unknown after the deadline, got %#v", err)
	}
	ids := map[interface{}]bool{}
	for _, g := range append(a.got(), b.got()...) {
		ids[g["request_id"]] = true
	}
	if len(ids) != 1 || !ids[e.RequestID] || len(a.got())+len(b.got()) < 2 {
		t.Fatalf("attempts %d+%d with request ids %v, error's %s", len(a.got()), len(b.got()), ids, e.RequestID)
	}

	// A read that gets no answer is never "unknown": nothing changed.
	_, err = c.Lookup(ctxTimeout(t, 300*time.Millisecond), "s", "k")
	if !errors.As(err, &e) || e.Kind != NotApplied || e.Applied != "false" {
		t.Fatalf("lookup: want NotApplied, got %#v", err)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestClusterIDPinnedAtTheFirstAnswer(t *testing.T) {
	other := "ffffffffffffffffffffffffffffffff"
	a := newFake(t, func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, accepted(body, false))
	})
	b := newFake(t, func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request) {
		ans := accepted(body, false)
		ans["cluster_id"] = other
		writeJSON(w, 200, ans)
	})
	c, _ := New(Config{Nodes: []string{a.srv.URL}})
	if _, err := c.Claim(context.Background(), ClaimRequest{Scope: "s", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if c.ClusterID() != fakeCluster {
		t.Fatalf("pinned %q", c.ClusterID())
	}
	if _, ok := a.got()[0]["cluster_id"]; ok {
		t.Fatalf("an unpinned client sent a cluster_id: %v", a.got()[0])
	}
	// The same client, now reaching the other cluster.
	c.nodes = []string{b.srv.URL}
	_, err := c.Claim(context.Background(), ClaimRequest{Scope: "s", Key: "k"})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrClusterMismatch) || e.Kind != Definite ||
		e.Status != StatusFailedPrecondition || !strings.Contains(e.Error(), "cluster id mismatch") || e.Applied != "false" {
		t.Fatalf("want a cluster id mismatch, not applied, got %#v", err)
	}
	if len(b.got()) != 1 {
		t.Fatalf("a mismatch was retried: %d attempts", len(b.got()))
	}
	// The pinned client's write carried the pin, for the node to refuse.
	if got := b.got()[0]["cluster_id"]; got != fakeCluster {
		t.Fatalf("the pinned write's cluster_id: %v", got)
	}
	// Given in the Config, the pin holds from the first call.
	c2, _ := New(Config{Nodes: []string{b.srv.URL}, ClusterID: strings.ToUpper(fakeCluster)})
	if _, err := c2.Lookup(context.Background(), "s", "k"); !errors.Is(err, ErrClusterMismatch) {
		t.Fatalf("configured pin: %v", err)
	}
}

func TestLookupEscapesThePath(t *testing.T) {
	var got string
	a := newFake(t, func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request) {
		got = r.URL.EscapedPath()
		writeJSON(w, 200, map[string]interface{}{"outcome": "NOT_FOUND", "cluster_id": fakeCluster})
	})
	c, _ := New(Config{Nodes: []string{strings.TrimPrefix(a.srv.URL, "http://")}})
	ans, err := c.Lookup(context.Background(), "pay/ments", "a b%c?d#é")
	if err != nil || ans.Outcome != NotFound {
		t.Fatal(ans, err)
	}
	if got != "/v1/records/pay%2Fments/a%20b%25c%3Fd%23%C3%A9" {
		t.Fatalf("path %s", got)
	}
}

func TestErrorKindsMatchSentinels(t *testing.T) {
	e := &Error{Kind: NotApplied, Status: StatusUnavailable, Applied: "false"}
	var err error = e
	if !errors.Is(err, ErrNotApplied) || errors.Is(err, ErrUnknown) || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrDefinite) {
		t.Fatal("NotApplied/UNAVAILABLE sentinels")
	}
	oe := &OutcomeError{Op: "complete", Outcome: NotOwner}
	if !errors.Is(oe, ErrFenced) || errors.Is(oe, ErrKeyFailed) || !strings.Contains(oe.Error(), "fenced") {
		t.Fatal("OutcomeError sentinels")
	}
	if !IsTerminal(Terminal(io.EOF)) || IsTerminal(io.EOF) || !errors.Is(Terminal(io.EOF), io.EOF) || Terminal(nil) != nil {
		t.Fatal("Terminal")
	}
	if s := truncateUTF8(strings.Repeat("é", 600)+"\x00", MaxError); len(s) > MaxError || strings.Contains(s, "\x00") {
		t.Fatalf("truncate: %d bytes", len(s))
	}
}

func tlsConfigForTest() *tls.Config { return &tls.Config{MinVersion: tls.VersionTLS13} }

// The README's example is example/main.go's body (which TestReadmeExample
// runs against the cluster), but for the nodes, which the file also takes
// from its arguments.
func TestReadmeQuotesTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("example", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(c, err := once.New.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md: no example block")
	}
	lines := strings.Split(strings.TrimSpace(string(m[1])), "\n")
	if len(lines) < 10 || len(lines) > 20 {
		t.Fatalf("README example: %d lines", len(lines))
	}
	body := string(src)
	for _, l := range lines[1:] {
		if !strings.Contains(body, "\t"+l+"\n") && strings.TrimSpace(l) != "" {
			t.Errorf("README line not in example/main.go: %q", l)
		}
	}
	if !strings.Contains(lines[0], `"127.0.0.1:7121", "127.0.0.1:7122", "127.0.0.1:7123"`) ||
		!strings.Contains(body, `nodes := []string{"127.0.0.1:7121", "127.0.0.1:7122", "127.0.0.1:7123"}`) {
		t.Error("the example's nodes are not scripts/run's HTTP ports")
	}
}

func TestDecodeIntegersWrittenAsStrings(t *testing.T) {
	// Above 2^63-1 a node writes the integer as a decimal string.
	b := []byte(`{"outcome":"FOUND","log_time_ms":"18446744073709551615","first_index":3,` +
		`"attempts":[{"request_id":"","index":"9223372036854775808","time_ms":1,"outcome":"ACCEPTED","retry":false}],"kind":"NONCE"}`)
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.LogTimeMS != 18446744073709551615 || a.FirstIndex != 3 || a.Kind != Nonce ||
		len(a.Attempts) != 1 || a.Attempts[0].Index != 9223372036854775808 || a.Attempts[0].Outcome != Accepted {
		t.Fatalf("%+v", a)
	}
	var s StatusAnswer
	if err := json.Unmarshal([]byte(`{"outcome":"OK","term":"18446744073709551614","role":"LEADER"}`), &s); err != nil ||
		s.Term != 18446744073709551614 || s.Role != RoleLeader {
		t.Fatalf("%+v %v", s, err)
	}
	// A string that is no integer is still refused.
	if err := json.Unmarshal([]byte(`{"outcome":"OK","term":"many"}`), &s); err == nil {
		t.Fatal("term \"many\" decoded")
	}
}

func TestClaimBatchItemsAndRetry(t *testing.T) {
	// The first attempt is taken and hung up (outcome unknown); the retry
	// must carry the same item request ids, in the body's "items".
	// The answer: a decision, an item's own INVALID_ARGUMENT, an UNKNOWN.
	f := newFake(t, func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/claims" || n == 1 {
			hangUp(w)
			return
		}
		items, _ := body["items"].([]interface{})
		out := []map[string]interface{}{
			accepted(items[0].(map[string]interface{}), true),
			{"error": "INVALID_ARGUMENT", "applied": "false", "message": "ttl_ms: too long",
				"request_id": items[1].(map[string]interface{})["request_id"], "cluster_id": fakeCluster},
			{"error": "UNKNOWN", "applied": "unknown", "message": "answer too large",
				"request_id": items[2].(map[string]interface{})["request_id"], "cluster_id": fakeCluster},
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	c, err := New(Config{Nodes: []string{f.srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	given := NewRequestID()
	res, err := c.ClaimBatch(ctxTimeout(t, 10*time.Second), []ClaimRequest{
		{Scope: "s", Key: "a", MaxUses: 3},
		{Scope: "s", Key: "b", TTL: time.Hour, RequestID: given},
		{Scope: "s", Key: "c", Idempotent: true, TTL: time.Minute, Sliding: true},
	})
	if err != nil || len(res) != 3 {
		t.Fatalf("batch: %v %+v", err, res)
	}
	got := f.got()
	if len(got) != 2 {
		t.Fatalf("%d attempts, want 2", len(got))
	}
	first, _ := got[0]["items"].([]interface{})
	second, _ := got[1]["items"].([]interface{})
	if len(first) != 3 || len(second) != 3 || got[1]["timeout"] == nil || got[1]["cluster_id"] != nil {
		t.Fatalf("bodies: %v", got)
	}
	for i := range first {
		a, b := first[i].(map[string]interface{}), second[i].(map[string]interface{})
		if a["request_id"] != b["request_id"] || a["request_id"] != res[i].RequestID {
			t.Fatalf("item %d: request ids %v, %v, result %s", i, a["request_id"], b["request_id"], res[i].RequestID)
		}
	}
	if res[1].RequestID != given || first[0].(map[string]interface{})["max_uses"] != float64(3) ||
		first[2].(map[string]interface{})["sliding"] != true || first[2].(map[string]interface{})["ttl"] != float64(60000) {
		t.Fatalf("items as sent: %v", first)
	}
	if res[0].Answer == nil || res[0].Err != nil || res[0].Answer.Outcome != Accepted || !res[0].Answer.Retry {
		t.Fatalf("item 0: %+v", res[0])
	}
	var e *Error
	if res[1].Answer != nil || !errors.As(res[1].Err, &e) || e.Kind != Definite || !errors.Is(e, ErrInvalidArgument) || e.RequestID != given {
		t.Fatalf("item 1: %+v", res[1])
	}
	if res[2].Answer != nil || !errors.As(res[2].Err, &e) || e.Kind != Unknown || e.Applied != "unknown" || e.RequestID != res[2].RequestID {
		t.Fatalf("item 2: %+v", res[2])
	}
	if c.ClusterID() != fakeCluster {
		t.Fatalf("pin %q", c.ClusterID())
	}
}

func TestClaimBatchRefusesAnotherClustersItem(t *testing.T) {
	f := newFake(t, func(n int, body map[string]interface{}, w http.ResponseWriter, r *http.Request) {
		items, _ := body["items"].([]interface{})
		a := accepted(items[0].(map[string]interface{}), false)
		a["cluster_id"] = "00000000000000000000000000000001"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode([]interface{}{a})
	})
	c, err := New(Config{Nodes: []string{f.srv.URL}, ClusterID: fakeCluster})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.ClaimBatch(ctxTimeout(t, 5*time.Second), []ClaimRequest{{Scope: "s", Key: "a"}})
	if !errors.Is(err, ErrClusterMismatch) || len(res) != 1 || res[0].Answer != nil || res[0].Err != err || res[0].RequestID == "" {
		t.Fatalf("another cluster: %v %+v", err, res)
	}
	if n := len(f.got()); n != 1 || f.got()[0]["cluster_id"] != fakeCluster {
		t.Fatalf("%d attempts (want 1, no retry on another cluster), bodies %v", n, f.got())
	}
}

func TestDecodeRecordedNewFields(t *testing.T) {
	var a Answer
	if err := json.Unmarshal(recorded(t, "claim_nuse_last.json"), &a); err != nil {
		t.Fatal(err)
	}
	if a.Outcome != Accepted || a.MaxUses != 2 || a.Uses != 2 || a.UsesLeft != 0 || a.Sliding || a.ServedBy != "" {
		t.Errorf("claim_nuse_last: %+v", a)
	}
	a = Answer{}
	if err := json.Unmarshal(recorded(t, "claim_sliding.json"), &a); err != nil {
		t.Fatal(err)
	}
	if !a.Sliding || a.Kind != Idempotent || a.MaxUses != 0 {
		t.Errorf("claim_sliding: %+v", a)
	}
	a = Answer{}
	if err := json.Unmarshal(recorded(t, "lookup_served_by.json"), &a); err != nil {
		t.Fatal(err)
	}
	if a.Outcome != Found || a.ServedBy != "8f34d31fe04f10a4" || a.ServedBy != a.NodeID || a.UsesLeft != 0 || a.Uses != 2 {
		t.Errorf("lookup_served_by: %+v", a)
	}
}

func TestDecodeRecordedBatch(t *testing.T) {
	// A node's recorded answer to [b1, b1, b3 with a ttl past max_ttl],
	// served for a batch of three.
	body := recorded(t, "batch_claims.json")
	f := newFake(t, func(n int, _ map[string]interface{}, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	c, err := New(Config{Nodes: []string{f.srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.ClaimBatch(ctxTimeout(t, 5*time.Second), []ClaimRequest{
		{Scope: "s", Key: "b1"}, {Scope: "s", Key: "b1"}, {Scope: "s", Key: "b3", TTL: 1000 * time.Hour}})
	if err != nil || len(res) != 3 {
		t.Fatalf("batch: %v %+v", err, res)
	}
	if res[0].Answer.Outcome != Accepted || res[1].Answer.Outcome != Replayed ||
		res[1].Answer.FirstRequestID != res[0].Answer.RequestID || res[0].Answer.MaxUses != 1 {
		t.Fatalf("decisions: %+v / %+v", res[0].Answer, res[1].Answer)
	}
	var e *Error
	if res[2].Answer != nil || !errors.As(res[2].Err, &e) || e.Kind != Definite || !errors.Is(e, ErrInvalidArgument) ||
		e.RequestID != "2b844ed8b0e075d0f738d0a9c1cfb431" || !strings.Contains(e.Message, "ttl_ms") {
		t.Fatalf("item error: %+v", res[2])
	}
	// An answer with another number of items than sent: Unknown.
	res, err = c.ClaimBatch(ctxTimeout(t, 5*time.Second), []ClaimRequest{{Scope: "s", Key: "b1"}})
	if !errors.Is(err, ErrUnknown) || len(res) != 1 || res[0].Err != err {
		t.Fatalf("3 answers to 1 item: %v %+v", err, res)
	}
}
