package once

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Limits of the API (include/once.h, docs/http-api.md).
const (
	MaxNodes       = 64
	MaxScope       = 128
	MaxKey         = 256
	MaxExecutionID = 128
	MaxPayloadHash = 64
	MaxResult      = 65536
	MaxError       = 1024
	// MaxUses is the most uses an N-use nonce takes (ClaimRequest.MaxUses).
	MaxUses = 64
	// MaxBatch is the most claims one ClaimBatch carries.
	MaxBatch = 4096
	// maxBatchBody is the most bytes of a /v1/claims body (the
	// listener's ceiling).
	maxBatchBody = 1 << 20
	// DefaultTimeout is a call's deadline when neither its context nor
	// Config.Timeout gives one (libonce's and the node's default).
	DefaultTimeout = 5 * time.Second
	// maxCallTimeout is the most a node accepts as a call's "timeout".
	maxCallTimeout = 60 * time.Second
)

// As libonce (src/client/client.h): an attempt that other nodes could
// answer takes at most half of what remains of the deadline, but not less
// than attemptMin; between attempts the backoff doubles from backoffFirst
// to backoffMax.
const (
	attemptMin   = time.Second
	backoffFirst = 20 * time.Millisecond
	backoffMax   = 200 * time.Millisecond
	maxAnswer    = 1 << 20 // an answer holds at most 64 KiB of result, as base64
	// A batch's answer: its items' protobuf answers fit in ~1 MiB (the
	// node answers UNKNOWN for an item past that), their JSON takes more
	// (base64, field names, up to 4,096 objects).
	maxBatchAnswer = 16 << 20
)

// Config makes a Client.
type Config struct {
	// Nodes: the base URLs of some or all nodes' HTTP listeners
	// ("http://127.0.0.1:7121", "https://10.0.0.1:7121"); a bare
	// "IP:PORT" gets http://, or https:// when TLS is set. 1..64.
	Nodes []string
	// ClusterID (32 hex digits): accept answers from this cluster only.
	// Empty: the client pins the cluster id of the first answer.
	ClusterID string
	// Timeout: a call's deadline when its context has none (0: 5 s).
	Timeout time.Duration
	// TLS: the client's TLS configuration for https:// nodes (RootCAs,
	// Certificates for the client certificate). nil: plain http://, or
	// the system's roots for an https:// URL.
	TLS *tls.Config
}

// Client calls a once cluster over its HTTP/JSON API with libonce's rules
// (docs/design.md §5, include/once.h): a fresh 128-bit request id per
// call, the same one on every retry of that call; a retry after an
// attempt that certainly did not apply goes to the next node, and so does
// one whose outcome is unknown, with the same request id (the state
// machine answers the repeated accepted request ACCEPTED retry=true);
// the cluster id pinned; every call bounded by its context's deadline.
// A Client is safe for concurrent use.
type Client struct {
	nodes   []string
	timeout time.Duration
	hc      *http.Client

	mu        sync.Mutex
	pinned    string
	preferred int
}

// New makes a Client. It connects lazily: nothing is sent here.
func New(cfg Config) (*Client, error) {
	if len(cfg.Nodes) == 0 {
		return nil, invalid("Nodes: at least one node is required")
	}
	if len(cfg.Nodes) > MaxNodes {
		return nil, invalid("Nodes: %d nodes, at most %d", len(cfg.Nodes), MaxNodes)
	}
	if cfg.Timeout < 0 {
		return nil, invalid("Timeout: negative (%v)", cfg.Timeout)
	}
	c := &Client{timeout: cfg.Timeout}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	for i, n := range cfg.Nodes {
		base, err := baseURL(n, cfg.TLS != nil)
		if err != nil {
			return nil, invalid("Nodes[%d]: %v", i, err)
		}
		c.nodes = append(c.nodes, base)
	}
	if cfg.ClusterID != "" {
		if !isHex(cfg.ClusterID, 32) {
			return nil, invalid("ClusterID: want 32 hex digits, got %q", cfg.ClusterID)
		}
		c.pinned = strings.ToLower(cfg.ClusterID)
	}
	tr := &http.Transport{
		// Never an environment proxy: the nodes are named by address.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 8,
		// Under the nodes' 10 s idle timeout, so a kept connection is
		// rarely one the node is closing.
		IdleConnTimeout:     5 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
	}
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS.Clone()
	}
	c.hc = &http.Client{
		Transport: tr,
		// An API answer is never a redirect; following one would send
		// the call somewhere the caller did not name.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// ClusterID is the pinned cluster id ("" before the first answer).
func (c *Client) ClusterID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pinned
}

// Nodes gives the nodes' base URLs, as the client uses them.
func (c *Client) Nodes() []string { return append([]string(nil), c.nodes...) }

// NewRequestID gives a fresh random 128-bit request id (32 hex digits).
func NewRequestID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; a request id that is not
		// random would break the state machine's retry detection.
		panic("once: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

func baseURL(n string, tlsSet bool) (string, error) {
	if !strings.Contains(n, "://") {
		if tlsSet {
			n = "https://" + n
		} else {
			n = "http://" + n
		}
	}
	u, err := url.Parse(n)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: want http:// or https://", n)
	}
	if u.Host == "" || u.Port() == "" {
		return "", fmt.Errorf("%q: want a host and a port", n)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: want only scheme://host:port", n)
	}
	if tlsSet && u.Scheme != "https" {
		return "", fmt.Errorf("%q: TLS is set, want https://", n)
	}
	return u.Scheme + "://" + u.Host, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// call is one API call, from its first attempt to its result.
type call struct {
	op        string // "claim", "lookup"...: for messages
	method    string
	path      string
	body      map[string]interface{} // POST; "timeout" is added per attempt
	write     bool                   // may change the cluster's state
	requestID string
	oneNode   string // status of one node: no other node is tried
	batch     bool   // /v1/claims: a 200 answer is a JSON array
}

// errorAnswer: the fields of an error answer (and the ones every answer has).
type errorAnswer struct {
	Outcome    Outcome `json:"outcome"`
	Error      string  `json:"error"`
	Applied    string  `json:"applied"`
	LeaderHint string  `json:"leader_hint"`
	Message    string  `json:"message"`
	RequestID  string  `json:"request_id"`
	ClusterID  string  `json:"cluster_id"`
	NodeID     string  `json:"node_id"`
	BootID     string  `json:"boot_id"`
}

// run makes the call's attempts until one gives a decision (decoded into
// out) or a final error, within ctx's deadline (else the client's).
func (c *Client) run(ctx context.Context, k *call, out interface{}) error {
	if ctx == nil {
		return invalid("%s: nil context", k.op)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()

	var nodes []string
	start := 0
	if k.oneNode != "" {
		nodes = []string{k.oneNode}
	} else {
		nodes = c.nodes
		c.mu.Lock()
		start = c.preferred
		c.mu.Unlock()
	}
	node := start % len(nodes)
	maybeApplied := false
	backoff := time.Duration(0)
	attempts := 0
	var last *Error
	// The last error that says more than "the time ran out" (a refused
	// TLS handshake, a refused connection): the deadline's error names it.
	var telling *Error

	finish := func(e *Error) error {
		e.Attempts = attempts
		if e.RequestID == "" {
			e.RequestID = k.requestID
		}
		if maybeApplied && k.write {
			e.Applied = "unknown"
			if e.Kind == NotApplied {
				e.Kind = Unknown
			}
		}
		return e
	}

	for {
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			return finish(c.deadlineError(ctx, k, last, telling))
		}
		budget := remaining
		if len(nodes) > 1 && remaining > 2*attemptMin {
			budget = remaining / 2
			if budget < attemptMin {
				budget = attemptMin
			}
		}
		attempts++
		e, final := c.attempt(ctx, nodes[node], k, budget, out, &maybeApplied)
		if e == nil {
			if k.oneNode == "" {
				c.mu.Lock()
				c.preferred = node
				c.mu.Unlock()
			}
			return nil
		}
		last = e
		if e.Err == nil || (!errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled)) {
			telling = e
		}
		if final {
			return finish(e)
		}
		if k.oneNode == "" && e.HTTPStatus == 0 {
			// Later calls should not start at a node that did not
			// answer (libonce's rule: an error answer leaves it).
			c.mu.Lock()
			if c.preferred == node {
				c.preferred = (node + 1) % len(nodes)
			}
			c.mu.Unlock()
		}
		node = (node + 1) % len(nodes)
		if backoff == 0 {
			backoff = backoffFirst
		} else if backoff *= 2; backoff > backoffMax {
			backoff = backoffMax
		}
		delay := backoff
		left := time.Until(deadline)
		if delay >= left {
			// Keep trying into the deadline's last moments (a leader
			// may just have been elected), but not with a sliver.
			if left < 2*backoffFirst {
				return finish(c.deadlineError(ctx, k, last, telling))
			}
			delay = left / 2
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return finish(c.deadlineError(ctx, k, last, telling))
		case <-t.C:
		}
	}
}

// deadlineError: the call's deadline passed (or its context was
// cancelled); the last attempt's error says why it had no answer.
func (c *Client) deadlineError(ctx context.Context, k *call, last, telling *Error) *Error {
	cause := ctx.Err()
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	e := &Error{
		Kind:    NotApplied,
		Status:  StatusDeadlineExceeded,
		Applied: "false",
		Message: fmt.Sprintf("%s: the deadline passed", k.op),
		Err:     cause,
	}
	if errors.Is(cause, context.Canceled) {
		e.Message = fmt.Sprintf("%s: the context was cancelled", k.op)
	}
	if last != nil {
		e.Message += "; last attempt: " + last.Status + ": " + last.Message
		if last.Err != nil {
			e.Message += ": " + last.Err.Error()
		}
		e.Node = last.Node
		e.HTTPStatus = last.HTTPStatus
		e.LeaderHint = last.LeaderHint
		e.ClusterID, e.NodeID, e.BootID = last.ClusterID, last.NodeID, last.BootID
		if last.Kind == Unknown {
			e.Kind = Unknown
			e.Applied = "unknown"
		}
	}
	if telling != nil && telling != last {
		e.Message += "; before: " + telling.Status + ": " + telling.Message
		if telling.Err != nil {
			e.Message += ": " + telling.Err.Error()
		}
	}
	return e
}

// attempt sends the call once to node. It returns nil when out holds a
// decision, else the attempt's error and whether it is final. It sets
// *maybeApplied when the call may have taken effect.
func (c *Client) attempt(ctx context.Context, node string, k *call, budget time.Duration, out interface{}, maybeApplied *bool) (*Error, bool) {
	actx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()

	var body io.Reader
	if k.method == http.MethodPost {
		// The node answers its own deadline a little before ours, so
		// its answer (applied "false" before the command was proposed)
		// arrives instead of a silence that would be "unknown".
		nodeTimeout := budget
		if budget >= 100*time.Millisecond {
			nodeTimeout = budget * 9 / 10
		}
		if nodeTimeout > maxCallTimeout {
			nodeTimeout = maxCallTimeout
		}
		ms := nodeTimeout.Milliseconds()
		if ms < 1 {
			ms = 1
		}
		m := make(map[string]interface{}, len(k.body)+1)
		for key, v := range k.body {
			m[key] = v
		}
		m["timeout"] = ms
		// The pin travels with every write: a node of another cluster
		// refuses it before proposing (503 FAILED_PRECONDITION, applied
		// "false"), so a write never lands in a cluster this client
		// refuses.
		c.mu.Lock()
		if c.pinned != "" {
			m["cluster_id"] = c.pinned
		}
		c.mu.Unlock()
		b, err := json.Marshal(m)
		if err != nil {
			return invalid("%s: %v", k.op, err), true
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(actx, k.method, node+k.path, body)
	if err != nil {
		return invalid("%s: %v", k.op, err), true
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "once-go/"+Version)

	var sentMu sync.Mutex
	sent := false
	trace := &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				sentMu.Lock()
				sent = true
				sentMu.Unlock()
			}
		},
	}
	req = req.WithContext(httptrace.WithClientTrace(actx, trace))

	resp, err := c.hc.Do(req)
	if err != nil {
		sentMu.Lock()
		wasSent := sent
		sentMu.Unlock()
		e := &Error{Node: node, Err: err}
		if wasSent && k.write {
			// The request reached the node: it may be in the log.
			*maybeApplied = true
			e.Kind, e.Status, e.Applied = Unknown, StatusUnknown, "unknown"
			e.Message = "no answer after sending"
		} else if wasSent {
			e.Kind, e.Status, e.Applied = NotApplied, StatusUnavailable, "false"
			e.Message = "no answer"
		} else {
			e.Kind, e.Status, e.Applied = NotApplied, StatusUnavailable, "false"
			e.Message = "could not send"
		}
		if actx.Err() != nil && ctx.Err() == nil {
			e.Status = StatusDeadlineExceeded
			e.Message += " within the attempt's time"
		}
		return e, false
	}
	defer resp.Body.Close()
	limit := int64(maxAnswer)
	if k.batch {
		limit = maxBatchAnswer
	}
	raw, rerr := io.ReadAll(io.LimitReader(resp.Body, limit))
	if k.batch && rerr == nil && resp.StatusCode == http.StatusOK && len(bytes.TrimSpace(raw)) > 0 && bytes.TrimSpace(raw)[0] == '[' {
		return c.batchAnswer(node, raw, out, maybeApplied)
	}

	var ea errorAnswer
	jerr := json.Unmarshal(raw, &ea)
	if rerr != nil || jerr != nil || (ea.Error == "" && ea.Outcome == "") {
		// Not an answer of the API: the body was lost, or this is not
		// a once node (a 404 text), or the node could not write it (500).
		e := &Error{Node: node, HTTPStatus: resp.StatusCode, Kind: NotApplied, Status: StatusUnavailable, Applied: "false"}
		e.Message = fmt.Sprintf("HTTP %d without an API answer", resp.StatusCode)
		if rerr != nil {
			e.Err = rerr
		} else if jerr != nil {
			e.Err = jerr
		}
		if k.write && (resp.StatusCode >= 500 || resp.StatusCode == http.StatusOK) {
			*maybeApplied = true
			e.Kind, e.Status, e.Applied = Unknown, StatusUnknown, "unknown"
		}
		return e, false
	}

	if e := c.checkPin(node, resp.StatusCode, &ea); e != nil {
		return e, true
	}

	if ea.Error != "" {
		e := &Error{
			Status: ea.Error, Applied: ea.Applied, Message: ea.Message,
			LeaderHint: ea.LeaderHint, RequestID: ea.RequestID,
			Node: node, HTTPStatus: resp.StatusCode,
			ClusterID: ea.ClusterID, NodeID: ea.NodeID, BootID: ea.BootID,
		}
		if e.Applied != "unknown" {
			e.Applied = "false"
		}
		if ea.Outcome != "" {
			// The state machine's refusal (a full table, a bound): a
			// decision that nothing was done, not worth another node.
			e.Kind = NotApplied
			if ea.Error == StatusInvalidArgument {
				e.Kind = Definite
			}
			if e.Message == "" {
				e.Message = string(ea.Outcome)
			}
			return e, true
		}
		switch ea.Error {
		case StatusInvalidArgument, StatusPermissionDenied, StatusFailedPrecondition:
			e.Kind = Definite
			if ea.Error == StatusFailedPrecondition && strings.Contains(ea.Message, "cluster id mismatch") {
				// The node refused the pin (an answer without its own
				// cluster id, which the check above would have caught).
				e.Err = errMismatch
			}
			return e, true
		case StatusUnavailable, StatusResourceExhausted:
			e.Kind = NotApplied
		default:
			// UNKNOWN, DEADLINE_EXCEEDED (a forwarding node may answer its
			// own deadline although the leader had the call), or a name
			// this client does not know: perhaps applied.
			if k.write {
				*maybeApplied = true
			}
			e.Kind = Unknown
		}
		if e.Applied == "unknown" && k.write {
			*maybeApplied = true
			e.Kind = Unknown
		}
		if !k.write {
			e.Kind = NotApplied
		}
		return e, false
	}

	if resp.StatusCode != http.StatusOK {
		e := &Error{Node: node, HTTPStatus: resp.StatusCode, Kind: NotApplied, Status: StatusUnavailable, Applied: "false",
			Message: fmt.Sprintf("HTTP %d with outcome %s", resp.StatusCode, ea.Outcome)}
		if k.write {
			*maybeApplied = true
			e.Kind, e.Status, e.Applied = Unknown, StatusUnknown, "unknown"
		}
		return e, false
	}
	if err := json.Unmarshal(raw, out); err != nil {
		e := &Error{Node: node, HTTPStatus: resp.StatusCode, Kind: NotApplied, Status: StatusUnavailable, Applied: "false",
			Message: "malformed answer", Err: err}
		if k.write {
			*maybeApplied = true
			e.Kind, e.Status, e.Applied = Unknown, StatusUnknown, "unknown"
		}
		return e, false
	}
	return nil, false
}

// checkPin pins the cluster id of the first answer and refuses an answer
// of another cluster (nil: the answer may be used).
func (c *Client) checkPin(node string, httpStatus int, ea *errorAnswer) *Error {
	if ea.ClusterID == "" {
		return nil
	}
	cid := strings.ToLower(ea.ClusterID)
	c.mu.Lock()
	pinned := c.pinned
	if pinned == "" {
		c.pinned = cid
		pinned = cid
	}
	c.mu.Unlock()
	if cid == pinned {
		return nil
	}
	// Another cluster (re-created, restored, or a wrong address) must
	// never decide for this one: fail closed, no retry. A write carried
	// the pin, so that node refused it before proposing: not applied
	// there (an earlier attempt's "unknown" stays, as finish makes it).
	return &Error{
		Kind: Definite, Status: StatusFailedPrecondition, Applied: "false",
		Message:    fmt.Sprintf("cluster id mismatch: pinned %s, answered %s by node %s at %s", pinned, cid, ea.NodeID, node),
		Node:       node,
		HTTPStatus: httpStatus,
		ClusterID:  cid, NodeID: ea.NodeID, BootID: ea.BootID,
		Err: errMismatch,
	}
}

// batchAnswer takes a 200 answer of /v1/claims, a JSON array of one
// object per item: every item must come from the pinned cluster. An
// answer that does not decode may have been applied: Unknown, retried
// with the same request ids.
func (c *Client) batchAnswer(node string, raw []byte, out interface{}, maybeApplied *bool) (*Error, bool) {
	var items []json.RawMessage
	err := json.Unmarshal(raw, &items)
	if err == nil {
		for _, m := range items {
			var ea errorAnswer
			if err = json.Unmarshal(m, &ea); err != nil {
				break
			}
			if e := c.checkPin(node, http.StatusOK, &ea); e != nil {
				return e, true
			}
		}
	}
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		*maybeApplied = true
		return &Error{Node: node, HTTPStatus: http.StatusOK, Kind: Unknown, Status: StatusUnknown, Applied: "unknown",
			Message: "malformed batch answer", Err: err}, false
	}
	return nil, false
}
