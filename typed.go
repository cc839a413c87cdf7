package jobraft

import (
	"context"
	"errors"
	"fmt"
)

// The typed jobs of a Kind: submit its arguments, handle them, read its
// results.

// Request returns req as a job of this kind with args as its payload
// (for SubmitBatch). req names no other kind and carries no payload of its
// own. Its error matches ErrInvalidRequest, and ErrCodec (a *CodecError)
// when args do not encode; it never quotes the arguments.
func (k Kind[T]) Request(req SubmitRequest, args T) (SubmitRequest, error) {
	invalid := func(cause error) error { return &classed{class: ErrInvalidRequest, cause: cause} }
	if req.Kind != "" && req.Kind != k.name {
		return req, invalid(fmt.Errorf("a request of kind %q given to kind %q", req.Kind, k.name))
	}
	if req.Payload != nil {
		return req, invalid(fmt.Errorf("a request of kind %q carries a payload of %d bytes beside its arguments", k.name, len(req.Payload)))
	}
	p, err := k.codec.Marshal(args)
	if err != nil {
		return req, invalid(&CodecError{Kind: k.name, Op: "encode arguments", Err: err})
	}
	req.Kind, req.Payload = k.name, p
	return req, nil
}

// Submit submits a job of this kind with args (Controller.Submit, with
// its guarantees). Arguments that do not encode, or a request Request
// refuses, are a *SubmitError matching ErrNotSubmitted and
// ErrInvalidRequest (and ErrCodec when the codec refused): nothing was
// proposed.
func (k Kind[T]) Submit(ctx context.Context, c *Controller, req SubmitRequest, args T) (Submitted, error) {
	r, err := k.Request(req, args)
	if err != nil {
		return Submitted{Job: Job{ID: req.ID}}, &SubmitError{ID: req.ID, Class: ErrNotSubmitted, Cause: err}
	}
	return c.Submit(ctx, r)
}

// Args decodes job's arguments (a *CodecError when they do not decode).
func (k Kind[T]) Args(job Job) (T, error) {
	var args T
	if job.Kind != k.name {
		return args, fmt.Errorf("jobraft: job %s is of kind %q, not %q", job.ID, job.Kind, k.name)
	}
	if err := k.codec.Unmarshal(job.Payload, &args); err != nil {
		return args, &CodecError{Kind: k.name, JobID: job.ID, Op: "decode arguments", Len: len(job.Payload), Err: err}
	}
	return args, nil
}

// Handler is a handler of this kind: fn gets the job's decoded arguments;
// nil acks the job (no result), an error naks it as any handler's. See
// Kind for a payload that does not decode.
func (k Kind[T]) Handler(fn func(ctx context.Context, job Job, args T) error) Handler {
	return Handle(k, func(ctx context.Context, job Job, args T) ([]byte, error) { return nil, fn(ctx, job, args) })
}

// Handle is a handler of kind k with a result of type R: fn's result is
// encoded with k's codec as the job's result (a []byte R is the result as
// it is). A result that does not encode never will: the job is termed with
// a *CodecError. See Kind for a payload that does not decode.
func Handle[T, R any](k Kind[T], fn func(ctx context.Context, job Job, args T) (R, error)) Handler {
	return func(ctx context.Context, job Job) ([]byte, error) {
		args, err := k.Args(job)
		if errors.Is(err, ErrCodec) {
			return nil, Permanent(err) // it never will decode
		} else if err != nil {
			return nil, err // another kind: naked
		}
		res, err := fn(ctx, job, args)
		if err != nil {
			return nil, err
		}
		if b, ok := any(res).([]byte); ok {
			return b, nil
		}
		out, err := k.codec.Marshal(res)
		if err != nil {
			return nil, Permanent(&CodecError{Kind: k.name, JobID: job.ID, Op: "encode result", Err: err})
		}
		return out, nil
	}
}

// ResultOf decodes the result of job, of kind k, as an R with k's codec
// (a *CodecError when it does not decode, as for a job that has none).
func ResultOf[R, T any](k Kind[T], job Job) (R, error) {
	var res R
	if b, ok := any(&res).(*[]byte); ok {
		*b = job.Result
		return res, nil
	}
	if err := k.codec.Unmarshal(job.Result, &res); err != nil {
		return res, &CodecError{Kind: k.name, JobID: job.ID, Op: "decode result", Len: len(job.Result), Err: err}
	}
	return res, nil
}
