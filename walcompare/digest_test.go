package walcompare

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/jobraft/jobraft/internal/logdigest"
)

// TestViewMirrorsDigestView: View holds every field of logdigest.View
// (same name, type and JSON tag) plus Class, and the conversions both ways
// keep every field, so a field added to the protocol's view cannot be
// dropped silently.
func TestViewMirrorsDigestView(t *testing.T) {
	dt, vt := reflect.TypeOf(logdigest.View{}), reflect.TypeOf(View{})
	if vt.NumField() != dt.NumField()+1 {
		t.Fatalf("View has %d fields, logdigest.View %d (+Class)", vt.NumField(), dt.NumField())
	}
	if f, ok := vt.FieldByName("Class"); !ok || f.Index[0] != 0 || f.Tag.Get("json") != "class" {
		t.Fatalf("View.Class: %+v", f)
	}
	var d logdigest.View
	dv := reflect.ValueOf(&d).Elem()
	for i := 0; i < dt.NumField(); i++ {
		df := dt.Field(i)
		vf, ok := vt.FieldByName(df.Name)
		if !ok || vf.Type != df.Type || vf.Tag != df.Tag || vf.Index[0] != i+1 {
			t.Fatalf("logdigest.View.%s (%s %s) has no twin in View: %+v", df.Name, df.Type, df.Tag, vf)
		}
		// A distinct non-zero value per field.
		f := dv.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.String:
			f.SetString("detail")
		default:
			f.SetUint(uint64(i + 1))
		}
	}
	v := viewOf(&d)
	if v.Class != "" {
		t.Fatalf("viewOf set a class: %+v", v)
	}
	if back := v.digestView(); back != d {
		t.Fatalf("round trip: %+v -> %+v -> %+v", d, v, back)
	}
}

// TestLostAgreesWithDigests: the comparer's lost payload is the one the
// digests count as bad.
func TestLostAgreesWithDigests(t *testing.T) {
	for _, present := range []bool{false, true} {
		for _, corrupt := range []bool{false, true} {
			for _, n := range []uint32{0, 3} {
				for _, stamped := range []bool{false, true} {
					for _, sl := range []uint32{0, 3} {
						v := View{Present: present, Corrupt: corrupt, Len: n, Stamped: stamped, StampLen: sl}
						d := v.digestView()
						want := present && !corrupt && n == 0 && stamped && sl > 0
						if v.lost() != want || d.Lost() != want {
							t.Fatalf("%+v: lost %v, logdigest %v, want %v", v, v.lost(), d.Lost(), want)
						}
					}
				}
			}
		}
	}
}

// TestServeDigestRefusalsAreWalcompares: a caller of the public
// ServeDigest can tell its refusals apart with walcompare's own sentinels
// (the protocol's package is internal), and a refusal reads nothing.
func TestServeDigestRefusalsAreWalcompares(t *testing.T) {
	s := raft.NewInmemStore()
	for _, c := range []struct {
		req  string
		want error
	}{
		{`not json`, ErrBadDigestRequest},
		{`{"op":"digests","from":9,"to":3,"parts":1}`, ErrBadDigestRequest},
		{`{"op":"rewrite"}`, ErrUnknownDigestOp},
	} {
		out, err := ServeDigest(context.Background(), s, nil, []byte(c.req))
		if !errors.Is(err, c.want) || out != nil {
			t.Errorf("ServeDigest(%q) = %d bytes, %v; want nothing and %v", c.req, len(out), err, c.want)
		}
	}
}
