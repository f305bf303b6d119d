package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/kread"
	"github.com/kjob/kjob/internal/store/dedupe"
	"github.com/kjob/kjob/internal/store/dlq"
	"github.com/kjob/kjob/internal/store/jobmsg"
)

// Dead letters and their redrive, as kjobctl dlq and the dashboard show
// and redrive them: one implementation for both. (Moved from
// cmd/kjobctl/dlqcmd.go with its behaviour unchanged.) Letters are decoded
// with internal/store/dlq, the codec the worker writes them with.

// DeadLetter is a dead letter as an operator lists it: the codec's
// dlq.Letter, embedded (its reason, origin, attempts, worker, time, key,
// value, original headers, size and hash are the letter's own, defined in
// internal/store/dlq and nowhere else), plus what the operator adds: where
// the letter is in the dead-letter topic, the window it holds, what could
// not be read, and the window's state and the letter's redrive.
//
// Its JSON (kjobctl dlq -o json, the dashboard) is the flat object it has
// always been: see MarshalJSON.
type DeadLetter struct {
	dlq.Letter
	// ID is the letter's offset ("<partition>:<offset>" outside
	// partition 0); Partition and Offset locate it in the dead-letter
	// topic.
	ID        string
	Partition int32
	Offset    int64
	// WindowID, Job and Payload are the window's, when the letter's value
	// decodes (else Job is the record's key).
	WindowID string
	Job      string
	Payload  json.RawMessage
	// DecodeError says why the value does not decode as a window.
	DecodeError string
	// Incomplete says what the letter left out of the original record
	// (empty: nothing; it can be redriven). An incomplete letter is never
	// redriven, not even with force.
	Incomplete string
	// LetterError says which dead-letter header is missing or malformed.
	LetterError string
	// RecordHeaders are all the record's headers by key, the letter's own
	// (dlq.HeaderPrefix) included.
	RecordHeaders map[string]string
	// WindowState is the window's record in Redis now (nil: no record, or
	// not read).
	WindowState *WindowState
	// Redriven is the letter's last redrive (nil: never redriven).
	Redriven *Redrive

	// read says the letter was read from the topic (ParseDeadLetter): a
	// DeadLetter made otherwise has no record to republish.
	read bool
}

// deadLetterJSON is DeadLetter's JSON form.
type deadLetterJSON struct {
	ID          string            `json:"id"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	WindowID    string            `json:"window_id"`
	Job         string            `json:"job"`
	Reason      string            `json:"reason"`
	Origin      string            `json:"origin"`
	Attempts    int               `json:"attempts"`
	Worker      string            `json:"worker"`
	At          time.Time         `json:"dead_lettered_at"`
	Headers     map[string]string `json:"headers"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	Value       string            `json:"value,omitempty"`
	DecodeError string            `json:"decode_error,omitempty"`
	ValueSize   int               `json:"value_size"`
	ValueSHA256 string            `json:"value_sha256,omitempty"`
	Incomplete  string            `json:"incomplete,omitempty"`
	LetterError string            `json:"letter_error,omitempty"`
	WindowState *WindowState      `json:"window_state,omitempty"`
	Redriven    *Redrive          `json:"redriven,omitempty"`
}

func (d DeadLetter) toJSON() deadLetterJSON {
	j := deadLetterJSON{ID: d.ID, Partition: d.Partition, Offset: d.Offset, WindowID: d.WindowID, Job: d.Job, Reason: d.Reason,
		Attempts: d.Attempts, Worker: d.Worker, At: d.At, Headers: d.RecordHeaders, Payload: d.Payload, DecodeError: d.DecodeError,
		ValueSize: d.ValueSize, ValueSHA256: d.ValueSHA256, Incomplete: d.Incomplete, LetterError: d.LetterError,
		WindowState: d.WindowState, Redriven: d.Redriven}
	if d.read || d.Origin != (dlq.Origin{}) {
		j.Origin = d.Origin.String()
	}
	if d.DecodeError != "" {
		j.Value = string(d.Value)
	}
	return j
}

func (j deadLetterJSON) deadLetter() DeadLetter {
	d := DeadLetter{ID: j.ID, Partition: j.Partition, Offset: j.Offset, WindowID: j.WindowID, Job: j.Job, Payload: j.Payload,
		DecodeError: j.DecodeError, Incomplete: j.Incomplete, LetterError: j.LetterError, RecordHeaders: j.Headers,
		WindowState: j.WindowState, Redriven: j.Redriven}
	d.Reason, d.Attempts, d.Worker, d.At = j.Reason, j.Attempts, j.Worker, j.At
	d.ValueSize, d.ValueSHA256, d.Value = j.ValueSize, j.ValueSHA256, []byte(j.Value)
	d.Origin = parseOrigin(j.Origin)
	return d
}

// parseOrigin parses "topic[partition]@offset" (dlq.Origin.String); a
// string that does not parse is kept as the topic.
func parseOrigin(s string) dlq.Origin {
	i := strings.LastIndexByte(s, '[')
	j := strings.LastIndex(s, "]@")
	if i < 0 || j < i {
		return dlq.Origin{Topic: s}
	}
	p, err1 := strconv.ParseInt(s[i+1:j], 10, 32)
	o, err2 := strconv.ParseInt(s[j+2:], 10, 64)
	if err1 != nil || err2 != nil {
		return dlq.Origin{Topic: s}
	}
	return dlq.Origin{Topic: s[:i], Partition: int32(p), Offset: o}
}

// MarshalJSON writes d as one flat object: id, partition, offset,
// window_id, job, reason, origin ("topic[partition]@offset"), attempts,
// worker, dead_lettered_at, headers (every record header), payload, value
// (only for an undecodable one), decode_error, value_size, value_sha256,
// incomplete, letter_error, window_state and redriven.
func (d DeadLetter) MarshalJSON() ([]byte, error) { return json.Marshal(d.toJSON()) }

// UnmarshalJSON reads what MarshalJSON writes. The result has no record to
// republish.
func (d *DeadLetter) UnmarshalJSON(b []byte) error {
	var j deadLetterJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = j.deadLetter()
	return nil
}

// WindowState is a window's record in Redis, as kjobctl dlq list shows it.
type WindowState struct {
	Status    string    `json:"status"`
	Token     int64     `json:"token"`
	Attempts  int       `json:"attempts"`
	Holder    string    `json:"holder,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// String is "status (token N)", or "none" for no record.
func (w *WindowState) String() string {
	if w == nil {
		return "none"
	}
	return fmt.Sprintf("%s (token %d)", w.Status, w.Token)
}

// In locates d in the dead-letter topic named topic.
func (d DeadLetter) In(topic string) dlq.Origin {
	return dlq.Origin{Topic: topic, Partition: d.Partition, Offset: d.Offset}
}

// ParseDeadLetter decodes a record of the dead-letter topic with
// dlq.Parse. Its ID is its offset ("<partition>:<offset>" outside
// partition 0). A letter that is malformed (LetterError) or holds only
// part of the original record (Incomplete: a cut value, key or headers,
// or a minimal letter) is still returned with everything that could be
// read.
func ParseDeadLetter(r *kgo.Record) DeadLetter {
	l, err := dlq.Parse(r)
	d := DeadLetter{Letter: l, ID: strconv.FormatInt(r.Offset, 10), Partition: r.Partition, Offset: r.Offset, RecordHeaders: map[string]string{},
		Incomplete: l.Missing(), read: true}
	if l.Minimal {
		d.Incomplete = "a minimal letter (the dead-letter topic refused the full one): no key, value or original headers"
	}
	if r.Partition != 0 {
		d.ID = fmt.Sprintf("%d:%d", r.Partition, r.Offset)
	}
	if err != nil {
		d.LetterError = err.Error()
	}
	for _, h := range r.Headers {
		d.RecordHeaders[h.Key] = string(h.Value)
	}
	if m, err := jobmsg.Unmarshal(l.Value); err == nil && !l.ValueTruncated {
		d.WindowID, d.Job, d.Payload = m.ID, m.Job, m.Payload
	} else {
		if l.ValueTruncated {
			d.DecodeError = fmt.Sprintf("the letter holds %d of its %d bytes", len(l.Value), l.ValueSize)
		} else {
			d.DecodeError = err.Error()
		}
		d.Job = string(l.Key)
	}
	return d
}

// ParseDeadLetterID parses a dead letter's ID as DeadLetter.ID writes it.
func ParseDeadLetterID(s string) (int32, int64, error) {
	ps, os, ok := strings.Cut(s, ":")
	if !ok {
		os, ps = ps, "0"
	}
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if err1 != nil || err2 != nil || p < 0 || o < 0 {
		return 0, 0, errors.New("bad id")
	}
	return int32(p), o, nil
}

// ReadDeadLetters reads every record of the dead-letter topic dlqTopic
// with a client made of opts (seed brokers, TLS, SASL), in partition and
// offset order. A dead-letter topic that does not exist is ErrNoTopic.
func ReadDeadLetters(ctx context.Context, opts []kgo.Opt, dlqTopic string) ([]DeadLetter, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, dlqTopic)
	if err != nil {
		return nil, fmt.Errorf("dlq: %s: %w", dlqTopic, err)
	}
	if t, ok := td[dlqTopic]; !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("dlq: dead-letter topic %s: %w (a worker creates it when it starts)", dlqTopic, ErrNoTopic)
	}
	starts, err := adm.ListStartOffsets(ctx, dlqTopic)
	if err != nil {
		return nil, fmt.Errorf("dlq: %s: %w", dlqTopic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, dlqTopic)
	if err != nil {
		return nil, fmt.Errorf("dlq: %s: %w", dlqTopic, err)
	}
	var out []DeadLetter
	var rerr error
	ends.Each(func(e kadm.ListedOffset) {
		if rerr != nil || e.Err != nil {
			return
		}
		s, _ := starts.Lookup(e.Topic, e.Partition)
		recs, err := kread.Range(ctx, opts, dlqTopic, e.Partition, s.Offset, e.Offset)
		if err != nil {
			rerr = fmt.Errorf("dlq: %w", err)
			return
		}
		for _, r := range recs {
			out = append(out, ParseDeadLetter(r))
		}
	})
	slices.SortFunc(out, func(a, b DeadLetter) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out, rerr
}

// AnnotateDeadLetters fills in each letter's window state and redrive
// record.
func AnnotateDeadLetters(ctx context.Context, store WindowStore, rd *Redrives, dlqTopic string, letters []DeadLetter) error {
	var ids []string
	for _, d := range letters {
		if d.WindowID != "" && !slices.Contains(ids, d.WindowID) {
			ids = append(ids, d.WindowID)
		}
	}
	states, err := store.States(ctx, ids)
	if err != nil {
		return fmt.Errorf("dlq: window states: %w", err)
	}
	redrives, err := rd.List(ctx, dlqTopic)
	if err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	for i := range letters {
		d := &letters[i]
		if st, ok := states[d.WindowID]; ok {
			d.WindowState = &WindowState{Status: st.Status, Token: st.Token, Attempts: st.Attempts, Holder: st.Holder, UpdatedAt: st.UpdatedAt.UTC()}
		}
		if r, ok := redrives[d.In(dlqTopic)]; ok {
			d.Redriven = &r
		}
	}
	return nil
}

// RedriveItem is one chosen letter and what a redrive does with it.
type RedriveItem struct {
	DeadLetter
	// Skip says why the letter is left out; empty: it is redriven.
	Skip string `json:"skip,omitempty"`
	// With names the letter of the same window that is republished in its
	// place.
	With string `json:"with,omitempty"`
}

// redriveItemJSON is RedriveItem's JSON form: the letter's fields, then
// skip and with.
type redriveItemJSON struct {
	deadLetterJSON
	Skip string `json:"skip,omitempty"`
	With string `json:"with,omitempty"`
}

// MarshalJSON writes the letter as DeadLetter.MarshalJSON does, with skip
// and with.
func (it RedriveItem) MarshalJSON() ([]byte, error) {
	return json.Marshal(redriveItemJSON{it.DeadLetter.toJSON(), it.Skip, it.With})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (it *RedriveItem) UnmarshalJSON(b []byte) error {
	var j redriveItemJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*it = RedriveItem{DeadLetter: j.deadLetter(), Skip: j.Skip, With: j.With}
	return nil
}

// PlanRedrive decides, for each chosen letter, whether it is redriven.
// It always leaves out an incomplete letter, even with force:
// republishing part of a record is not redriving it. Without force it
// also leaves out letters redriven before and letters whose window is
// done or running (it would run a second time). Of the letters
// of one window that are not left out, the last one is republished and the
// others are recorded with it.
func PlanRedrive(chosen []DeadLetter, force bool) []RedriveItem {
	items := make([]RedriveItem, 0, len(chosen))
	latest := map[string]string{} // window id -> id of its last letter to redrive
	for _, d := range chosen {
		it := RedriveItem{DeadLetter: d}
		ws := d.WindowState
		switch {
		case d.Incomplete != "":
			// Even with force: republishing part of a record is not
			// redriving it.
			it.Skip = incompleteSkip(d)
		case d.Redriven != nil && !force:
			it.Skip = "redriven before, at " + fmtTime(d.Redriven.At) + RedriveTarget(d.Redriven)
		case ws != nil && ws.Status == dedupe.StatusDone && !force:
			it.Skip = fmt.Sprintf("its window is done since %s (token %d); it would run a second time", fmtTime(ws.UpdatedAt), ws.Token)
		case ws != nil && ws.Status == dedupe.StatusRunning && !force:
			it.Skip = fmt.Sprintf("its window is running (token %d, %s)", ws.Token, orDash(ws.Holder))
		case d.WindowID != "":
			latest[d.WindowID] = d.ID
		}
		items = append(items, it)
	}
	for i := range items {
		it := &items[i]
		if it.Skip == "" && it.WindowID != "" && latest[it.WindowID] != it.ID {
			it.With = latest[it.WindowID]
		}
	}
	return items
}

// incompleteSkip is why an incomplete letter is left out of a redrive.
func incompleteSkip(d DeadLetter) string {
	return fmt.Sprintf("the letter holds only part of the original record (%s; value sha256 %s); the original is at %s while that topic retains it",
		d.Incomplete, orDash(d.ValueSHA256), d.Origin)
}

// RedriveTarget describes where a redrive put its letter, for a line of
// text: " with letter N", " (republished to topic[p]@o)", or that it was
// not confirmed.
func RedriveTarget(r *Redrive) string {
	switch {
	case r.With != "":
		return " with letter " + r.With
	case r.Topic != "":
		return fmt.Sprintf(" (republished to %s[%d]@%d)", r.Topic, r.Partition, r.Offset)
	}
	return " (not confirmed: kjobctl stopped before the record was acknowledged)"
}

// Redriven is a letter a redrive republished.
type Redriven struct {
	ID        string `json:"id"`
	WindowID  string `json:"window_id"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// RedriveConfig is what ExecuteRedrive needs.
type RedriveConfig struct {
	// Client republishes the letters. It must not sign (a redriven record
	// keeps the headers it had) and must partition by key as the producer
	// does.
	Client *kgo.Client
	// Store clears the windows' records; Redrives records the redrives.
	Store interface {
		Forget(ctx context.Context, id string) error
	}
	Redrives *Redrives
	// DLQTopic is the dead-letter topic; Topic the windows topic, where a
	// letter without an origin topic goes.
	DLQTopic, Topic string
	// By names who redrives, Now is the clock.
	By  string
	Now func() time.Time
}

// ExecuteRedrive redrives the items PlanRedrive chose (Skip and With
// empty): for each it records the redrive (without force, a letter
// redriven meanwhile by someone else is left out and its Skip set; an
// incomplete letter is left out whatever the plan said),
// clears the window's record (a fresh start: attempts and last error; the
// job's token counter is kept, so fencing still holds), republishes the
// record to its origin topic without the dead-letter headers, and records
// where it went. Letters of a window republished with another letter are
// recorded as redriven too. It stops at the first error, which says how
// many were redriven before.
func ExecuteRedrive(ctx context.Context, cfg RedriveConfig, items []RedriveItem, force bool) ([]Redriven, error) {
	out := []Redriven{}
	republished := map[string]Redriven{} // by letter id
	for k := range items {
		it := &items[k]
		if it.Skip != "" || it.With != "" {
			continue
		}
		d := it.DeadLetter
		switch {
		case !d.read:
			it.Skip = "the letter was not read from the dead-letter topic (ParseDeadLetter), so there is no record to republish"
			continue
		case d.Incomplete != "" || !d.Complete():
			// Not even with force: PlanRedrive leaves such letters out
			// already, and an item changed since must not slip through.
			if d.Incomplete == "" {
				d.Incomplete = d.Missing()
			}
			it.Skip = incompleteSkip(d)
			continue
		}
		r, err := cfg.Redrives.Begin(ctx, Redrive{Letter: d.In(cfg.DLQTopic), WindowID: d.WindowID, At: cfg.Now().UTC(), By: cfg.By}, force)
		if errors.Is(err, ErrAlreadyRedriven) {
			// Another operator redrove it since the list was read.
			it.Skip = fmt.Sprintf("redriven meanwhile at %s by %s", fmtTime(r.At), r.By)
			continue
		}
		if err != nil {
			return out, fmt.Errorf("%w (after %d redriven)", err, len(out))
		}
		topic := d.Origin.Topic
		if topic == "" {
			topic = cfg.Topic
		}
		if d.WindowID != "" {
			if err := cfg.Store.Forget(ctx, d.WindowID); err != nil {
				_ = cfg.Redrives.Delete(context.WithoutCancel(ctx), r.Letter)
				return out, fmt.Errorf("%w (after %d redriven)", err, len(out))
			}
		}
		rec := &kgo.Record{Topic: topic, Key: d.Key, Value: d.Value, Headers: d.Headers}
		if err := cfg.Client.ProduceSync(ctx, rec).FirstErr(); err != nil {
			_ = cfg.Redrives.Delete(context.WithoutCancel(ctx), r.Letter)
			return out, fmt.Errorf("republish %s to %s (after %d redriven): %w", d.ID, topic, len(out), err)
		}
		r.Topic, r.Partition, r.Offset = rec.Topic, rec.Partition, rec.Offset
		if err := cfg.Redrives.Finish(ctx, r); err != nil {
			return out, fmt.Errorf("%s was republished to %s[%d]@%d, but recording it failed: %w", d.ID, rec.Topic, rec.Partition, rec.Offset, err)
		}
		x := Redriven{ID: d.ID, WindowID: d.WindowID, Partition: rec.Partition, Offset: rec.Offset}
		republished[d.ID] = x
		out = append(out, x)
	}
	// Letters of a window republished with another letter are recorded as
	// redriven too, so --all leaves them out next time.
	for _, it := range items {
		if it.With == "" {
			continue
		}
		if _, ok := republished[it.With]; !ok {
			continue
		}
		r := Redrive{Letter: it.In(cfg.DLQTopic), WindowID: it.WindowID, At: cfg.Now().UTC(), By: cfg.By, With: it.With}
		if err := cfg.Redrives.Finish(ctx, r); err != nil {
			return out, err
		}
	}
	return out, nil
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
