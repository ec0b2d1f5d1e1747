package once

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// DoOptions tune Do. The zero value is fine.
type DoOptions struct {
	// Lease: how long this caller owns the key while fn runs (0: the
	// cluster's default, 30 s). Past it, another caller may take over and
	// this one's result is fenced (ErrFenced).
	Lease time.Duration
	// PayloadHash: the request's hash; a claim of the key with another
	// hash is a CONFLICT (ErrConflict).
	PayloadHash []byte
	// ExecutionID: kept as evidence in the record's attempts.
	ExecutionID string
	// IsTerminal decides whether fn's error fails the key for good (a
	// terminal release: every later Do gets ErrKeyFailed) or gives it up
	// for a retry (the next claim takes over). nil: errors wrapped with
	// Terminal are terminal, others are retryable.
	IsTerminal func(error) bool
	// MaxWait caps one wait between IN_PROGRESS claims (0: 1 s).
	MaxWait time.Duration
}

type terminalError struct{ err error }

func (t terminalError) Error() string { return t.err.Error() }
func (t terminalError) Unwrap() error { return t.err }

// Terminal marks fn's error as terminal for Do: the key is failed for
// good with the error's text stored. errors.Is/As still see err.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err}
}

// IsTerminal reports whether err was marked with Terminal.
func IsTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}

// Do runs fn at most once per (scope, key) across every caller of the
// cluster (issue 28 item 3):
//
//   - claim the key (idempotent); on ACCEPTED run fn, then complete with
//     its result serialized as JSON and return it;
//   - if fn fails (or panics), release the key with the error's text:
//     terminal or retryable as DoOptions.IsTerminal decides, and return
//     fn's error;
//   - on DUPLICATE return the stored result, decoded, without running fn;
//   - on IN_PROGRESS wait (the owner's lease, at most MaxWait) and claim
//     again, up to ctx's deadline (then ErrInProgress);
//   - if another caller took the key over while fn ran, the complete
//     answers NOT_OWNER: nothing is overwritten and Do returns fn's result
//     with an *OutcomeError matching ErrFenced;
//   - FAILED and CONFLICT claims give an *OutcomeError (ErrKeyFailed,
//     ErrConflict); call errors are *Error. When fn ran but its complete
//     ends in an error (Unknown: perhaps stored), Do returns fn's result
//     with that error: a later Do of the key tells (DUPLICATE, or a
//     takeover once the lease ends).
//
// Each claim is a call of its own (a fresh request id); the client
// retries each one with its own id as Client does. ctx bounds the whole
// of Do, fn included: give it a deadline longer than fn needs.
func Do[T any](ctx context.Context, c *Client, scope, key string, fn func(context.Context) (T, error), opts *DoOptions) (T, error) {
	var zero T
	var o DoOptions
	if opts != nil {
		o = *opts
	}
	if fn == nil {
		return zero, invalid("fn: nil")
	}
	if ctx == nil {
		return zero, invalid("Do: nil context")
	}
	if o.MaxWait <= 0 {
		o.MaxWait = time.Second
	}
	req := ClaimRequest{
		Scope: scope, Key: key, Idempotent: true,
		ExecutionID: o.ExecutionID, PayloadHash: o.PayloadHash, Lease: o.Lease,
	}
	for {
		req.RequestID = "" // a new call: a fresh request id
		a, err := c.Claim(ctx, req)
		if err != nil {
			return zero, err
		}
		switch a.Outcome {
		case Accepted:
			return runOwned(ctx, c, scope, key, a, fn, &o)
		case Duplicate:
			var v T
			if err := json.Unmarshal(a.Result, &v); err != nil {
				return zero, fmt.Errorf("once: the stored result of %s/%s does not decode: %w", scope, key, err)
			}
			return v, nil
		case InProgress:
			wait := time.Duration(a.RetryAfterMS) * time.Millisecond
			if wait < 20*time.Millisecond {
				wait = 20 * time.Millisecond
			}
			if wait > o.MaxWait {
				wait = o.MaxWait
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return zero, &OutcomeError{Op: "claim", Outcome: InProgress, Answer: a, Err: context.DeadlineExceeded}
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return zero, &OutcomeError{Op: "claim", Outcome: InProgress, Answer: a, Err: ctx.Err()}
			case <-t.C:
			}
		default:
			// FAILED, CONFLICT, or what a claim should never answer.
			return zero, &OutcomeError{Op: "claim", Outcome: a.Outcome, Answer: a}
		}
	}
}

func runOwned[T any](ctx context.Context, c *Client, scope, key string, a *Answer, fn func(context.Context) (T, error), o *DoOptions) (v T, err error) {
	token := a.OwnerToken
	release := func(cause error, terminal bool) error {
		r, rerr := c.Release(ctx, ReleaseRequest{
			Scope: scope, Key: key, OwnerToken: token,
			Terminal: terminal, Error: truncateUTF8(cause.Error(), MaxError),
		})
		if rerr != nil {
			return rerr
		}
		if r.Outcome == NotOwner {
			return &OutcomeError{Op: "release", Outcome: NotOwner, Answer: r, Err: cause}
		}
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			// Give the key up for a retry, then keep panicking.
			_ = release(fmt.Errorf("panic: %v", p), false)
			panic(p)
		}
	}()

	v, err = fn(ctx)
	if err != nil {
		terminal := IsTerminal(err)
		if o.IsTerminal != nil {
			terminal = o.IsTerminal(err)
		}
		// fn's error is what the caller wants to see; a failed release
		// only means the key is freed when the lease ends.
		_ = release(err, terminal)
		return v, err
	}
	result, merr := json.Marshal(v)
	if merr == nil && len(result) > MaxResult {
		merr = fmt.Errorf("%d bytes, at most %d", len(result), MaxResult)
	}
	if merr != nil {
		// The work ran but its result cannot be stored: give the key up
		// rather than leave it PENDING until the lease ends.
		merr = fmt.Errorf("once: the result of %s/%s cannot be stored: %w", scope, key, merr)
		_ = release(merr, false)
		return v, merr
	}
	done, cerr := c.Complete(ctx, CompleteRequest{Scope: scope, Key: key, OwnerToken: token, Result: result})
	if cerr != nil {
		return v, cerr
	}
	switch done.Outcome {
	case Completed:
		return v, nil
	case NotOwner:
		return v, &OutcomeError{Op: "complete", Outcome: NotOwner, Answer: done}
	default:
		return v, &OutcomeError{Op: "complete", Outcome: done.Outcome, Answer: done}
	}
}

// truncateUTF8 makes s a stored error the API takes: valid UTF-8, no NUL,
// at most max bytes.
func truncateUTF8(s string, max int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "?"), "\x00", "")
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
