package jobraft

import "encoding/json"

// Codec turns a kind's arguments and results into payload and result bytes
// and back (Kind.WithCodec). JSONCodec is the default.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is encoding/json.
type JSONCodec struct{}

var _ Codec = JSONCodec{}

// Marshal implements Codec.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements Codec.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Kind is a job kind whose arguments are a T: submit a T (Submit, Request)
// and handle a T (Handler, Handle) without touching payload bytes. The
// arguments travel as the job's payload, encoded by the kind's codec; a
// Kind is a value, safe to share.
//
// A payload that does not decode as a T (submitted as bytes by other code,
// or by another version of T) never will: the typed handler terms the job
// at once (dead, no more attempts) with a *CodecError as its reason and
// never calls the function. A job of another kind given to a typed handler
// (registered under another name, or as Default) is naked with an error
// naming both kinds.
type Kind[T any] struct {
	name  string
	codec Codec
}

// NewKind returns the kind name with arguments of type T, encoded as JSON.
func NewKind[T any](name string) Kind[T] { return Kind[T]{name: name, codec: JSONCodec{}} }

// WithCodec returns k encoding its arguments and results with c (nil:
// JSON).
func (k Kind[T]) WithCodec(c Codec) Kind[T] {
	if c == nil {
		c = JSONCodec{}
	}
	k.codec = c
	return k
}

// Name is the job kind (SubmitRequest.Kind, the key of
// WorkerConfig.Handlers).
func (k Kind[T]) Name() string { return k.name }
