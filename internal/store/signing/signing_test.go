package signing_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/store/signing"
)

var (
	k1 = signing.Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)}
	k2 = signing.Key{ID: "k2", Secret: bytes.Repeat([]byte{2}, 32)}
)

func rec() *kgo.Record {
	return &kgo.Record{Topic: "kjob.windows", Key: []byte("job"), Value: []byte(`{"v":1}`), Headers: []kgo.RecordHeader{
		{Key: "kjob-schema", Value: []byte("1")}, {Key: "content-type", Value: []byte("application/json")},
	}}
}

func sign(t *testing.T, k signing.Key, r *kgo.Record) *kgo.Record {
	t.Helper()
	s, err := signing.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sign(r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestVerify(t *testing.T) {
	required, err := signing.NewVerifier(true, k1, k2)
	if err != nil {
		t.Fatal(err)
	}
	optional, err := signing.NewVerifier(false, k1)
	if err != nil {
		t.Fatal(err)
	}
	k1other := signing.Key{ID: "k1", Secret: bytes.Repeat([]byte{9}, 32)}
	for _, c := range []struct {
		name string
		v    *signing.Verifier
		r    *kgo.Record
		want error
	}{
		{"signed k1", required, sign(t, k1, rec()), nil},
		{"signed k2 (rotation: both accepted)", required, sign(t, k2, rec()), nil},
		{"re-signed keeps one signature", required, sign(t, k2, sign(t, k1, rec())), nil},
		{"unsigned, required", required, rec(), signing.ErrUnsigned},
		{"unsigned, optional", optional, rec(), nil},
		{"unknown key", optional, sign(t, k2, rec()), signing.ErrUnknownKey},
		{"same id, other secret", required, sign(t, k1other, rec()), signing.ErrBadSignature},
		{"value altered", required, func() *kgo.Record { r := sign(t, k1, rec()); r.Value = []byte(`{"v":2}`); return r }(), signing.ErrBadSignature},
		{"key altered", required, func() *kgo.Record { r := sign(t, k1, rec()); r.Key = []byte("other"); return r }(), signing.ErrBadSignature},
		{"topic altered (copied from another topic)", required, func() *kgo.Record { r := sign(t, k1, rec()); r.Topic = "kjob.windows.dlq"; return r }(), signing.ErrBadSignature},
		{"kjob header altered", required, func() *kgo.Record { r := sign(t, k1, rec()); r.Headers[0].Value = []byte("2"); return r }(), signing.ErrBadSignature},
		{"kjob header added", required, func() *kgo.Record {
			r := sign(t, k1, rec())
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "kjob-extra", Value: []byte("x")})
			return r
		}(), signing.ErrBadSignature},
		{"key id swapped", required, func() *kgo.Record {
			r := sign(t, k1, rec())
			for i := range r.Headers {
				if r.Headers[i].Key == signing.HeaderKeyID {
					r.Headers[i].Value = []byte("k2")
				}
			}
			return r
		}(), signing.ErrBadSignature},
		{"signature not hex", required, func() *kgo.Record {
			r := sign(t, k1, rec())
			r.Headers[len(r.Headers)-1].Value = []byte("zz")
			return r
		}(), signing.ErrBadSignature},
		{"two signatures", required, func() *kgo.Record {
			r := sign(t, k1, rec())
			r.Headers = append(r.Headers, r.Headers[len(r.Headers)-1])
			return r
		}(), signing.ErrBadSignature},
		{"other headers are not covered", required, func() *kgo.Record {
			r := sign(t, k1, rec())
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "traceparent", Value: []byte("00-abc")})
			return r
		}(), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.v.Verify(c.r)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{func() error { _, err := signing.NewSigner(signing.Key{ID: "k", Secret: []byte("short")}); return err }(), "secret is 5 bytes"},
		{func() error { _, err := signing.NewSigner(signing.Key{ID: "a/b", Secret: k1.Secret}); return err }(), `key id "a/b"`},
		{func() error { _, err := signing.NewVerifier(true); return err }(), "no keys"},
		{func() error { _, err := signing.NewVerifier(true, k1, k1); return err }(), `"k1" appears twice`},
		{func() error { s, _ := signing.NewSigner(k1); return s.Sign(&kgo.Record{}) }(), "no Topic"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", c.err, c.want)
		}
	}
}

func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("2026-11", strings.Repeat("a", 44)+"\n")
	write("2026-10", strings.Repeat("b", 32))
	write(".hidden", "x") // a Secret mount's ..data entries are skipped like this
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	keys, err := signing.LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].ID != "2026-10" || keys[1].ID != "2026-11" || len(keys[1].Secret) != 44 {
		t.Fatalf("keys = %+v", keys)
	}
	write("bad", "short")
	if _, err := signing.LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("short key: got %v, want an error naming the file", err)
	}
	if _, err := signing.LoadKeys(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no key files") {
		t.Fatalf("empty dir: got %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	v, err := signing.NewVerifier(true, k1)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("job"), []byte("{}"), []byte("k1"), []byte("00"))
	f.Fuzz(func(t *testing.T, key, value, id, sig []byte) {
		r := &kgo.Record{Topic: "t", Key: key, Value: value, Headers: []kgo.RecordHeader{{Key: signing.HeaderKeyID, Value: id}, {Key: signing.HeaderSignature, Value: sig}}}
		_ = v.Verify(r) // must not panic
	})
}
