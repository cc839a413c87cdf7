package main

// What jobd accepts in a request, and how it refuses the rest. Every check
// here runs before anything is proposed, so a refusal changes nothing.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobraft/jobraft/fsm"
)

// Job IDs jobd accepts (in bodies, paths and the watch filter): 1 to
// fsm.MaxIDLen (256) bytes of A-Z a-z 0-9 '.' '_' ':' '-', and not "." or
// "..". They need no escaping in a URL path, a shell, a file name or a log
// line, and survive JSON unchanged. The library accepts more (any UTF-8 text
// without control characters, not starting with '@'); jobd is the only
// writer of its cluster, so every job it holds has an ID of this alphabet.
// IDs the controller assigns (jobraft.NewID) are in it.
func checkJobID(id string) error {
	if id == "" {
		return bad("empty job ID")
	}
	if len(id) > fsm.MaxIDLen {
		return bad("job ID of %d bytes: at most %d", len(id), fsm.MaxIDLen)
	}
	if id == "." || id == ".." {
		return bad("job ID %q: not . or ..", id)
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return bad("job ID %q: byte %d (%q) is outside A-Z a-z 0-9 . _ : -", id, i, id[i])
		}
	}
	return nil
}

func idByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
}

// pathID is the {id} of the request's path, checked.
// An ID the cluster derived (a schedule's job: "@schedule:tick") begins
// with '@', which no submitted ID may.
func pathID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if rest, ok := strings.CutPrefix(id, "@"); ok && rest != "" {
		return id, checkJobID(rest)
	}
	return id, checkJobID(id)
}

// checkContentType accepts application/json, optionally with charset=utf-8.
func checkContentType(ct string) error {
	unsupported := func(why string) error {
		return &clientError{code: http.StatusUnsupportedMediaType, kind: "unsupported_media_type",
			reason: "a request body must be Content-Type: application/json; " + why, close: true}
	}
	if ct == "" {
		return unsupported("the request has none")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return unsupported(fmt.Sprintf("not %q", ct))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return unsupported(fmt.Sprintf("charset %q is not utf-8", cs))
	}
	return nil
}

// decode reads exactly one JSON object with known fields only into v. An
// empty body decodes as {} when allowEmpty (and then needs no
// Content-Type). The body must be valid UTF-8 and hold no lone UTF-16
// surrogate escape: encoding/json would turn either into U+FFFD silently,
// storing text the client never sent.
func decode(r *http.Request, v any, allowEmpty bool) error {
	if r.ContentLength > 0 {
		// Refused before the body is read.
		if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
			return err
		}
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if allowEmpty {
			return nil
		}
		return bad("empty body: a JSON object is required")
	}
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return err // a chunked body: its length was not known before
	}
	if !utf8.Valid(body) {
		return bad("malformed JSON: the body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			// Named by its JSON key: the Go types a request decodes into
			// (embedding the client's) are no part of the API.
			key := ute.Field[strings.LastIndexByte(ute.Field, '.')+1:]
			return bad("malformed JSON: field %q at byte %d: a JSON %s where %s is wanted", key, ute.Offset, ute.Value, ute.Type)
		}
		return bad("malformed JSON: %v", err)
	}
	if dec.More() {
		return bad("malformed JSON: trailing data after the object")
	}
	if off, ok := loneSurrogate(body); ok {
		return bad("malformed JSON: a UTF-16 surrogate escape at byte %d is not part of a pair", off)
	}
	return nil
}

// readBody reads the whole body. A body cut short by the client (it closed
// or reset the connection, or sent a broken chunked encoding) is a 400, a
// body not received within -read-timeout a 408, one over -max-body a 413;
// each closes the connection.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		return body, nil
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &clientError{code: http.StatusRequestTimeout, kind: "timeout", close: true,
			reason: fmt.Sprintf("request body not received within the read timeout (%d of its bytes arrived)", len(body))}
	}
	return nil, &clientError{code: http.StatusBadRequest, kind: "incomplete_body", close: true,
		reason: fmt.Sprintf("request body ended early after %d bytes: %v", len(body), err)}
}

// loneSurrogate finds a \uD800-\uDFFF escape in a JSON text (valid JSON:
// decode checked it) that is not a high surrogate directly followed by a
// low one, and returns its offset.
func loneSurrogate(b []byte) (int, bool) {
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			if i+1 < len(b) && b[i+1] == 'u' {
				u, ok := hex4(b, i+2)
				switch {
				case ok && u >= 0xD800 && u <= 0xDBFF:
					lo, ok2 := uint16(0), false
					if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
						lo, ok2 = hex4(b, i+8)
					}
					if !ok2 || lo < 0xDC00 || lo > 0xDFFF {
						return i, true
					}
					i += 11 // the pair
					continue
				case ok && u >= 0xDC00 && u <= 0xDFFF:
					return i, true
				}
			}
			i++ // the escaped byte
		}
	}
	return 0, false
}

func hex4(b []byte, at int) (uint16, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var v uint16
	for _, c := range b[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}

// dropBody has the connection closed after the reply instead of reading
// the rest of r's body: the server would otherwise read up to 256 KiB of a
// body it will not use, at the client's pace, before closing.
func dropBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// boundBody gives a request's body -read-timeout to arrive: without it a
// client could hold a connection (and a file descriptor) for ever by
// sending its body slowly, token or not. The server clears the deadline
// itself when the body has been read to its end (net/http starts its
// background read then), so a long-poll claim or a watch is not cut by it
// (TestLongRequestsOutliveReadTimeout).
func boundBody(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 { // a body follows (-1: chunked)
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
		}
		next.ServeHTTP(w, r)
	})
}
