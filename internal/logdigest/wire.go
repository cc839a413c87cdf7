package logdigest

import "encoding/json"

// Method is the RPC method a member serves the protocol on. Its name
// predates this package and is kept: it is part of the wire format.
const Method = "jr.walcompare.digest"

// The ops of a Request (see the package documentation).
const (
	OpInfo    = "info"
	OpDigests = "digests"
	OpEntries = "entries"
)

// The protocol's limits: a digests request asks for at most MaxParts
// digests, an entries request for at most MaxEntries indexes.
const (
	MaxParts   = 1024
	MaxEntries = 4096
)

// Request is the JSON request of Method.
type Request struct {
	// Op is OpInfo, OpDigests or OpEntries.
	Op string `json:"op"`
	// From and To bound the indexes asked about, inclusive: [From, To].
	From uint64 `json:"from,omitempty"`
	To   uint64 `json:"to,omitempty"`
	// Parts is the number of digests asked for (OpDigests only).
	Parts int `json:"parts,omitempty"`
}

// Reply is the JSON reply of Method.
type Reply struct {
	// First and Last are the member's log bounds (0, 0: empty).
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// Floor is the member's persisted commit floor; HasFloor says whether
	// its store records one at all.
	Floor    uint64 `json:"floor"`
	HasFloor bool   `json:"has_floor"`
	// Digests answers OpDigests, Entries OpEntries.
	Digests []Digest `json:"digests,omitempty"`
	Entries []Entry  `json:"entries,omitempty"`
}

// Entry is the view of one held index in a Reply.
type Entry struct {
	Index uint64
	View
}

// wireEntry is Entry's encoding. Class is always empty: members built
// before this package encoded walcompare's view, whose (unset) class came
// first, and the encoding stays byte-identical. Decoders ignore it.
type wireEntry struct {
	Index uint64 `json:"i"`
	Class string `json:"class"`
	View
}

// MarshalJSON encodes e as {"i": index, "class": "", view fields...}.
func (e Entry) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireEntry{Index: e.Index, View: e.View})
}

// UnmarshalJSON decodes e from its encoding (the class is ignored).
func (e *Entry) UnmarshalJSON(b []byte) error {
	var w wireEntry
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Entry{Index: w.Index, View: w.View}
	return nil
}
