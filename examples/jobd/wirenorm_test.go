package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"
)

// normalise returns one JSON value (a reply body, compact as jobd writes
// it) with its volatile values replaced and every other byte kept: keys,
// key order, literals, escapes. What varies from run to run and is not the
// wire format:
//
//   - a string that is an RFC 3339 time becomes wireTime;
//   - a string under one of volatileStrings becomes "@key";
//   - a number becomes 1 (indexes, terms, tokens, counters, rates) unless
//     it stands under one of keptNumbers (what the scenario fixes).
//
// Replacements keep each value's JSON type, and a number becomes 1, not
// 0, so a golden still decodes into the client's types and re-encodes the
// same (an omitempty field is not dropped).
func normalise(raw []byte) ([]byte, error) {
	type frame struct {
		object    bool
		key       string
		expectKey bool
	}
	type splice struct {
		from, to int
		with     string
	}
	var (
		stack   []frame
		splices []splice
	)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		start := int(before)
		for start < end && strings.IndexByte(" \t\r\n,:", raw[start]) >= 0 {
			start++
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				stack = append(stack, frame{object: d == '{', expectKey: d == '{'})
			default:
				stack = stack[:top]
				if top > 0 && stack[top-1].object {
					stack[top-1].expectKey = true
				}
			}
			continue
		}
		if top >= 0 && stack[top].object && stack[top].expectKey {
			stack[top].key, stack[top].expectKey = tok.(string), false
			continue
		}
		var path []string
		for _, f := range stack {
			if f.object {
				path = append(path, f.key)
			}
		}
		if with, ok := volatile(path, tok); ok {
			splices = append(splices, splice{start, end, with})
		}
		if top >= 0 && stack[top].object {
			stack[top].expectKey = true
		}
	}
	var out bytes.Buffer
	at := 0
	for _, s := range splices {
		out.Write(raw[at:s.from])
		out.WriteString(s.with)
		at = s.to
	}
	out.Write(raw[at:])
	return out.Bytes(), nil
}

// wireTime stands for every time in a golden.
const wireTime = `"2000-01-01T00:00:00Z"`

// volatileStrings are the keys whose string values vary from run to run.
var volatileStrings = map[string]bool{"address": true, "leader_address": true, "digest": true, "cluster_id": true, "next": true}

// keptNumbers are the keys under which numbers are the scenario's own.
var keptNumbers = map[string]bool{"priority": true, "max_attempts": true, "attempts": true, "attempt": true, "jobs": true,
	"removed": true, "counts": true, "submit_entries": true, "submitted_jobs": true}

// volatile says what a scalar at path (the object keys above it, the
// innermost last) is replaced with, if anything.
func volatile(path []string, tok json.Token) (string, bool) {
	key := ""
	if len(path) > 0 {
		key = path[len(path)-1]
	}
	switch v := tok.(type) {
	case string:
		if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return wireTime, true
		}
		if volatileStrings[key] && v != "" {
			return strconv.Quote("@" + key), true
		}
	case json.Number:
		for _, k := range path {
			if keptNumbers[k] {
				return "", false
			}
		}
		return "1", true
	}
	return "", false
}
