package once

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// ClaimResult is one item's answer in a ClaimBatch, in the items' order:
// either Answer, the decision a single Claim would have given at that
// point (ACCEPTED, REPLAYED, DUPLICATE, ...), or Err, an *Error refusing
// this item alone (a bound, a scope the certificate lacks, a quota, or
// Unknown for an item whose answer did not fit: retry it alone with
// RequestID).
type ClaimResult struct {
	Answer *Answer
	Err    error
	// RequestID: the item's request id, the one a retry of it needs.
	RequestID string
}

// ClaimBatch sends 1..MaxBatch claims in one call (POST /v1/claims): the
// cluster applies them in order as consecutive claims after one consensus
// round, so a key twice in one batch is ACCEPTED, then REPLAYED. Each item
// is checked as Claim checks it (an error names the item, "items[3]: ...")
// and gets its own request id (fresh, or the one given).
//
// The call as a whole is retried like any write, with the same request
// ids: an item already applied answers ACCEPTED with Retry true. An item
// refused by these checks refuses the whole batch (nil results). When the
// whole call fails at the cluster (no leader, the deadline) the error is
// an *Error and the results still carry each item's RequestID with that error as Err,
// so a call that ended Unknown can be repeated with those ids (in
// ClaimRequest.RequestID), as a batch again or item by item.
func (c *Client) ClaimBatch(ctx context.Context, items []ClaimRequest) ([]ClaimResult, error) {
	if len(items) == 0 || len(items) > MaxBatch {
		return nil, invalid("batch: %d items, want 1..%d", len(items), MaxBatch)
	}
	bodies := make([]map[string]interface{}, len(items))
	results := make([]ClaimResult, len(items))
	for i, r := range items {
		b, rid, e := claimBody(r)
		if e != nil {
			e.Message = fmt.Sprintf("items[%d]: %s", i, e.Message)
			return nil, e
		}
		bodies[i] = b
		results[i].RequestID = rid
	}
	enc, err := json.Marshal(bodies)
	if err != nil {
		return nil, invalid("batch: %v", err)
	}
	// Room for {"items":...,"timeout":N,"cluster_id":"HEX32"}.
	if len(enc)+128 > maxBatchBody {
		return nil, invalid("batch: %d bytes of JSON, at most %d in one call: split it", len(enc), maxBatchBody-128)
	}
	var raw []json.RawMessage
	k := &call{op: "claim batch", method: http.MethodPost, path: "/v1/claims",
		body: map[string]interface{}{"items": json.RawMessage(enc)}, write: true, batch: true}
	if err := c.run(ctx, k, &raw); err != nil {
		for i := range results {
			results[i].Err = err
		}
		return results, err
	}
	if len(raw) != len(items) {
		// The node answers one object per item: anything else is not
		// its answer, and which items were applied is unknown.
		e := &Error{Kind: Unknown, Status: StatusUnknown, Applied: "unknown",
			Message: fmt.Sprintf("claim batch: %d answers to %d items", len(raw), len(items))}
		for i := range results {
			results[i].Err = e
		}
		return results, e
	}
	for i, m := range raw {
		results[i].Answer, results[i].Err = decodeItem(m, results[i].RequestID)
	}
	return results, nil
}

// decodeItem reads one item of a batch's answer: a decision, or the
// item's own error object (error, applied, message, request_id).
func decodeItem(m json.RawMessage, rid string) (*Answer, error) {
	var ea errorAnswer
	if err := json.Unmarshal(m, &ea); err != nil {
		return nil, &Error{Kind: Unknown, Status: StatusUnknown, Applied: "unknown", RequestID: rid,
			Message: "claim batch: malformed item answer", Err: err}
	}
	if ea.Error == "" {
		var a Answer
		if err := json.Unmarshal(m, &a); err != nil || a.Outcome == "" {
			return nil, &Error{Kind: Unknown, Status: StatusUnknown, Applied: "unknown", RequestID: rid,
				Message: "claim batch: item answer without an outcome", Err: err}
		}
		return &a, nil
	}
	e := &Error{Status: ea.Error, Applied: ea.Applied, Message: ea.Message, RequestID: ea.RequestID,
		LeaderHint: ea.LeaderHint, HTTPStatus: http.StatusOK,
		ClusterID: ea.ClusterID, NodeID: ea.NodeID, BootID: ea.BootID}
	if e.RequestID == "" {
		e.RequestID = rid
	}
	switch {
	case ea.Applied == "unknown":
		e.Kind = Unknown
	case ea.Error == StatusInvalidArgument || ea.Error == StatusPermissionDenied ||
		(ea.Error == StatusFailedPrecondition && ea.Outcome == ""):
		e.Kind = Definite
	case ea.Error == StatusUnavailable || ea.Error == StatusResourceExhausted || ea.Outcome != "":
		e.Kind = NotApplied
	default:
		// UNKNOWN (the item's answer did not fit), or a name this client
		// does not know: perhaps applied.
		e.Kind = Unknown
	}
	if e.Kind != Unknown {
		e.Applied = "false"
	} else {
		e.Applied = "unknown"
	}
	if e.Message == "" {
		e.Message = ea.Error
	}
	return nil, e
}
