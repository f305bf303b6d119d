package control_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/exec/control"
	"github.com/kjob/kjob/internal/store/specs"
)

// A seek request and its ack survive the control topic's encoding; a
// record of another kind, or without what a request needs, is refused.
func TestSeekRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	req := &control.SeekRequest{ID: "r1", Group: "g", Topic: "w", Offsets: map[int32]int64{0: 5, 2: 9}, IssuedBy: "alice", IssuedAt: at}
	rec, err := req.Record("w.control")
	if err != nil || rec.Topic != "w.control" || string(rec.Key) != "g" || control.Kind(rec) != control.KindSeek {
		t.Fatalf("Record = %+v, %v", rec, err)
	}
	got, err := control.ParseSeekRequest(rec)
	if err != nil || got.ID != "r1" || got.Offsets[2] != 9 || !got.IssuedAt.Equal(at) || got.V != control.Version {
		t.Fatalf("ParseSeekRequest = %+v, %v", got, err)
	}
	if _, err := control.ParseSeekAck(rec); !errors.Is(err, control.ErrInvalid) {
		t.Fatalf("a request parsed as an ack: %v", err)
	}
	ack := &control.SeekAck{RequestID: "r1", Group: "g", Topic: "w", Partition: 2, Offset: 9, Member: "w1", At: at}
	arec, err := ack.Record("w.control")
	if err != nil {
		t.Fatal(err)
	}
	if a, err := control.ParseSeekAck(arec); err != nil || a.RequestID != "r1" || a.Partition != 2 || a.Member != "w1" {
		t.Fatalf("ParseSeekAck = %+v, %v", a, err)
	}
	empty := &kgo.Record{Value: []byte(`{"v":1,"id":"x","group":"g","topic":"w"}`), Headers: []kgo.RecordHeader{{Key: control.HeaderKind, Value: []byte(control.KindSeek)}}}
	if _, err := control.ParseSeekRequest(empty); !errors.Is(err, control.ErrInvalid) {
		t.Fatalf("a request without offsets: %v", err)
	}
}

type noSeeker struct{}

func (noSeeker) Assigned() []int32                        { return nil }
func (noSeeker) Seek(context.Context, int32, int64) error { return nil }

// NewAgent refuses a configuration with a *configerr.Error naming the
// field, and derives the control topic from the windows topic.
func TestNewAgentConfig(t *testing.T) {
	ok := control.AgentConfig{Brokers: []string{"127.0.0.1:9092"}, Group: "g", Topic: "w", Member: "m", Seeker: noSeeker{}}
	if _, err := control.NewAgent(ok); err != nil {
		t.Fatal(err)
	}
	for field, mut := range map[string]func(*control.AgentConfig){
		"AgentConfig.Brokers":      func(c *control.AgentConfig) { c.Brokers = nil },
		"AgentConfig.Group":        func(c *control.AgentConfig) { c.Group = "" },
		"AgentConfig.Topic":        func(c *control.AgentConfig) { c.Topic = "" },
		"AgentConfig.Member":       func(c *control.AgentConfig) { c.Member = "" },
		"AgentConfig.Seeker":       func(c *control.AgentConfig) { c.Seeker = nil },
		"AgentConfig.ControlTopic": func(c *control.AgentConfig) { c.ControlTopic = "w" },
	} {
		cfg := ok
		mut(&cfg)
		_, err := control.NewAgent(cfg)
		if ce := configerr.As(err); ce == nil || ce.Field != field {
			t.Errorf("NewAgent without %s: %v", field, err)
		}
	}
	_, err := control.NewAgent(func() control.AgentConfig { c := ok; c.ControlTopic = "w"; return c }())
	if want := `control: AgentConfig.ControlTopic = "w" is the windows topic; leave it empty for "w.control"`; err == nil || err.Error() != want {
		t.Errorf("NewAgent = %v, want %s", err, want)
	}
}

// The schedule requests share the control topic and its kind header.
func TestSpecsShareTheKindHeader(t *testing.T) {
	if specs.HeaderKind != control.HeaderKind {
		t.Fatalf("specs.HeaderKind %q != control.HeaderKind %q", specs.HeaderKind, control.HeaderKind)
	}
}
