package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/cli"
	"github.com/kjob/kjob/internal/kread"
	"github.com/kjob/kjob/pkg/control"
	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/dlq"
	"github.com/kjob/kjob/pkg/jobmsg"
)

const dlqUsage = `kjobctl dlq: inspect dead letters and republish chosen ones.

Usage:
  kjobctl dlq list [flags]                         one line per dead letter
  kjobctl dlq show ID [flags]                      reason, origin, attempts, headers and payload
  kjobctl dlq redrive (ID... | --all) [--force] [--execute]
                                                   republish to the windows topic (dry run without --execute)

A dead letter's ID is its offset in the dead-letter topic (partition 0), as
"kjobctl dlq list" prints it. list and show give each letter's WINDOW STATE
(the window's record in Redis now: done, running, failed, dead, or none)
and whether and when it was REDRIVEN.

A redriven window gets a fresh start: its record in Redis (attempt count,
last error) is cleared before it is republished, and the redrive is
recorded in Redis. redrive leaves out letters whose window is done or
running (it would run a second time) and letters redriven before; --force
redrives them anyway. --all means every letter not redriven yet. Letters of
the same window are republished once. Redriven letters stay in the
dead-letter topic.`

// deadLetter is one record of the dead-letter topic, decoded by pkg/dlq.
type deadLetter struct {
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
	// ValueSize and ValueSHA256 identify the original value, also when
	// the letter holds only part of it.
	ValueSize   int    `json:"value_size"`
	ValueSHA256 string `json:"value_sha256,omitempty"`
	// Incomplete says what the letter left out of the original record
	// (empty: nothing; it can be redriven).
	Incomplete string `json:"incomplete,omitempty"`
	// LetterError says which dead-letter header is missing or malformed.
	LetterError string `json:"letter_error,omitempty"`
	// WindowState is the window's record in Redis now (nil: no record, or
	// not read).
	WindowState *windowState `json:"window_state,omitempty"`
	// Redriven is the letter's last redrive (nil: never redriven).
	Redriven *control.Redrive `json:"redriven,omitempty"`

	parsed dlq.Letter
}

// windowState is a window's record in Redis, as dlq list shows it.
type windowState struct {
	Status    string    `json:"status"`
	Token     int64     `json:"token"`
	Attempts  int       `json:"attempts"`
	Holder    string    `json:"holder,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (w *windowState) String() string {
	if w == nil {
		return "none"
	}
	return fmt.Sprintf("%s (token %d)", w.Status, w.Token)
}

func (d deadLetter) letter(topic string) control.Letter {
	return control.Letter{Topic: topic, Partition: d.Partition, Offset: d.Offset}
}

func parseDeadLetter(r *kgo.Record) deadLetter {
	l, err := dlq.Parse(r)
	d := deadLetter{ID: strconv.FormatInt(r.Offset, 10), Partition: r.Partition, Offset: r.Offset, Headers: map[string]string{},
		Reason: l.Reason, Origin: l.Origin.String(), Attempts: l.Attempts, Worker: l.Worker, At: l.At,
		ValueSize: l.ValueSize, ValueSHA256: l.ValueSHA256, Incomplete: l.Missing(), parsed: l}
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
		d.Headers[h.Key] = string(h.Value)
	}
	if m, err := jobmsg.Unmarshal(l.Value); err == nil && !l.ValueTruncated {
		d.WindowID, d.Job, d.Payload = m.ID, m.Job, m.Payload
	} else {
		if l.ValueTruncated {
			d.DecodeError = fmt.Sprintf("the letter holds %d of its %d bytes", len(l.Value), l.ValueSize)
		} else {
			d.DecodeError = err.Error()
		}
		d.Value = string(l.Value)
		d.Job = string(l.Key)
	}
	return d
}

// redriveItem is one chosen letter and what redrive does with it.
type redriveItem struct {
	deadLetter
	// Skip says why the letter is left out; empty: it is redriven.
	Skip string `json:"skip,omitempty"`
	// With names the letter of the same window that is republished in its
	// place.
	With string `json:"with,omitempty"`
}

func dlqCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "show" && args[0] != "redrive") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, dlqUsage)
			return nil
		}
		return fmt.Errorf("dlq: want a subcommand: list, show ID or redrive (ID... | --all): %w", errUsage)
	}
	sub := args[0]
	var o opts
	var all, execute, force bool
	f := cli.NewFlags("kjobctl dlq "+sub, dlqUsage)
	f.SetOutput(stdout)
	o.register(f)
	if sub == "redrive" {
		f.Bool(&all, "all", "", false, "redrive every dead letter not redriven yet")
		f.Bool(&force, "force", "", false, "also redrive letters redriven before and letters whose window is done or running")
		f.Bool(&execute, "execute", "", false, "republish (without it: dry run)")
	}
	pos, err := f.ParseInterspersed(args[1:])
	if err != nil {
		return err
	}
	switch {
	case sub == "list" && len(pos) > 0:
		return fmt.Errorf("dlq list: unexpected argument %q: %w", pos[0], errUsage)
	case sub == "show" && len(pos) != 1:
		return fmt.Errorf("dlq show: want exactly one ID argument, got %d: %w", len(pos), errUsage)
	case sub == "redrive" && all == (len(pos) > 0):
		return fmt.Errorf("dlq redrive: want dead-letter IDs or --all (not both): %w", errUsage)
	}
	for _, id := range pos {
		if _, _, err := parseDLQID(id); err != nil {
			return fmt.Errorf("dlq %s: ID %q: want a dead-letter id as \"kjobctl dlq list\" prints it (an offset such as 12): %w", sub, id, errUsage)
		}
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	cctx, cancel := o.ctx(ctx)
	defer cancel()
	letters, err := o.readDLQ(cctx)
	if err != nil {
		return err
	}
	store, err := o.store()
	if err != nil {
		return err
	}
	rd, err := o.redrives()
	if err != nil {
		return err
	}
	if err := o.annotate(cctx, store, rd, letters); err != nil {
		return err
	}
	var chosen []deadLetter
	for _, id := range pos {
		p, off, _ := parseDLQID(id)
		i := slices.IndexFunc(letters, func(d deadLetter) bool { return d.Partition == p && d.Offset == off })
		if i < 0 {
			return fmt.Errorf("dlq %s: no dead letter %s in %s (it holds %d; see kjobctl dlq list): %w", sub, id, o.dlqTopic, len(letters), errNotFound)
		}
		chosen = append(chosen, letters[i])
	}
	switch sub {
	case "list":
		if o.output == "json" {
			return writeJSON(stdout, letters)
		}
		return renderDLQList(stdout, letters)
	case "show":
		if o.output == "json" {
			return writeJSON(stdout, chosen[0])
		}
		return renderDLQShow(stdout, chosen[0])
	}

	// redrive: decide per letter, then republish.
	redrivenBefore := 0
	if all {
		for _, d := range letters {
			if d.Redriven != nil && !force {
				redrivenBefore++
				continue
			}
			chosen = append(chosen, d)
		}
	}
	items := planRedrive(chosen, force)
	if !execute {
		if o.output == "json" {
			if err := writeJSON(stdout, map[string]any{"executed": false, "redrive": items, "left_out_redriven_before": redrivenBefore}); err != nil {
				return err
			}
		} else {
			renderRedrivePlan(stdout, items, redrivenBefore)
		}
		return fmt.Errorf("dlq redrive: %w", errDryRun)
	}
	cl, err := o.redriver()
	if err != nil {
		return err
	}
	defer cl.Close()
	type redriven struct {
		ID        string `json:"id"`
		WindowID  string `json:"window_id"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
	}
	out := []redriven{}
	by := "kjobctl " + cli.DefaultID()
	republished := map[string]redriven{} // by letter id
	for k := range items {
		it := &items[k]
		if it.Skip != "" || it.With != "" {
			continue
		}
		d := it.deadLetter
		r, err := rd.Begin(cctx, control.Redrive{Letter: d.letter(o.dlqTopic), WindowID: d.WindowID, At: nowFunc().UTC(), By: by}, force)
		if errors.Is(err, control.ErrAlreadyRedriven) {
			// Another operator redrove it since this command read the list.
			it.Skip = fmt.Sprintf("redriven meanwhile at %s by %s", fmtTime(r.At), r.By)
			continue
		}
		if err != nil {
			return fmt.Errorf("dlq redrive: %w (after %d redriven)", err, len(out))
		}
		topic := d.parsed.Origin.Topic
		if topic == "" {
			topic = o.topic
		}
		if d.WindowID != "" {
			// A fresh start: attempts and last error are cleared (the
			// job's token counter is kept, so fencing still holds).
			if err := store.Forget(cctx, d.WindowID); err != nil {
				_ = rd.Delete(context.WithoutCancel(cctx), r.Letter)
				return fmt.Errorf("dlq redrive: %w (after %d redriven)", err, len(out))
			}
		}
		rec := &kgo.Record{Topic: topic, Key: d.parsed.Key, Value: d.parsed.Value, Headers: d.parsed.Headers}
		if err := cl.ProduceSync(cctx, rec).FirstErr(); err != nil {
			_ = rd.Delete(context.WithoutCancel(cctx), r.Letter)
			return fmt.Errorf("dlq redrive: republish %s to %s (after %d redriven): %w", d.ID, topic, len(out), err)
		}
		r.Topic, r.Partition, r.Offset = rec.Topic, rec.Partition, rec.Offset
		if err := rd.Finish(cctx, r); err != nil {
			return fmt.Errorf("dlq redrive: %s was republished to %s[%d]@%d, but recording it failed: %w", d.ID, rec.Topic, rec.Partition, rec.Offset, err)
		}
		x := redriven{ID: d.ID, WindowID: d.WindowID, Partition: rec.Partition, Offset: rec.Offset}
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
		r := control.Redrive{Letter: it.letter(o.dlqTopic), WindowID: it.WindowID, At: nowFunc().UTC(), By: by, With: it.With}
		if err := rd.Finish(cctx, r); err != nil {
			return fmt.Errorf("dlq redrive: %w", err)
		}
	}
	var skipped []redriveItem
	for _, it := range items {
		if it.Skip != "" {
			skipped = append(skipped, it)
		}
	}
	if o.output == "json" {
		if err := writeJSON(stdout, map[string]any{"executed": true, "redriven": out, "skipped": skipped, "left_out_redriven_before": redrivenBefore}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "Redrove %s (they stay in %s):\n", plural(len(out), "dead letter"), o.dlqTopic)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tWINDOW\tREPUBLISHED AT")
		for _, r := range out {
			fmt.Fprintf(tw, "%s\t%s\t%s[%d]@%d\n", r.ID, safe(r.WindowID), safe(o.topic), r.Partition, r.Offset)
		}
		tw.Flush()
		renderLeftOut(stdout, items, redrivenBefore)
	}
	if len(pos) > 0 && len(skipped) > 0 {
		return fmt.Errorf("dlq redrive: %d of the %d chosen dead letters were left out (see above); --force redrives them anyway: %w", len(skipped), len(pos), errConflict)
	}
	return nil
}

// planRedrive decides, for each chosen letter, whether it is redriven.
// Of the letters of one window that are not left out, the last one is
// republished and the others are recorded with it.
func planRedrive(chosen []deadLetter, force bool) []redriveItem {
	items := make([]redriveItem, 0, len(chosen))
	latest := map[string]string{} // window id -> id of its last letter to redrive
	for _, d := range chosen {
		it := redriveItem{deadLetter: d}
		ws := d.WindowState
		switch {
		case d.Incomplete != "":
			// Even with --force: republishing part of a record is not
			// redriving it.
			it.Skip = fmt.Sprintf("the letter holds only part of the original record (%s; value sha256 %s); the original is at %s while that topic retains it",
				d.Incomplete, orDash(d.ValueSHA256), d.Origin)
		case d.Redriven != nil && !force:
			it.Skip = "redriven before, at " + fmtTime(d.Redriven.At) + redriveTarget(d.Redriven)
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

func redriveTarget(r *control.Redrive) string {
	switch {
	case r.With != "":
		return " with letter " + r.With
	case r.Topic != "":
		return fmt.Sprintf(" (republished to %s[%d]@%d)", r.Topic, r.Partition, r.Offset)
	}
	return " (not confirmed: kjobctl stopped before the record was acknowledged)"
}

func renderRedrivePlan(w io.Writer, items []redriveItem, redrivenBefore int) {
	n := 0
	for _, it := range items {
		if it.Skip == "" && it.With == "" {
			n++
		}
	}
	fmt.Fprintf(w, "Would redrive %s:\n", plural(n, "dead letter"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWINDOW\tWINDOW STATE\tACTION")
	for _, it := range items {
		action := "redrive"
		switch {
		case it.Skip != "":
			action = "leave out: " + it.Skip
		case it.With != "":
			action = "same window as letter " + it.With + ", republished once"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.ID, windowName(it.deadLetter), stateCell(it.deadLetter), safe(action))
	}
	tw.Flush()
	if redrivenBefore > 0 {
		fmt.Fprintf(w, "%d letters redriven before are left out (--force includes them).\n", redrivenBefore)
	}
}

func renderLeftOut(w io.Writer, items []redriveItem, redrivenBefore int) {
	for _, it := range items {
		switch {
		case it.Skip != "":
			hint := " (--force redrives it anyway)"
			if it.Incomplete != "" {
				hint = ""
			}
			fmt.Fprintf(w, "Left out %s: %s%s\n", it.ID, safe(it.Skip), hint)
		case it.With != "":
			fmt.Fprintf(w, "Letter %s has the same window as %s: republished once, both recorded as redriven\n", it.ID, it.With)
		}
	}
	if redrivenBefore > 0 {
		fmt.Fprintf(w, "%d letters redriven before were left out (--force includes them).\n", redrivenBefore)
	}
}

// annotate fills in each letter's window state and redrive record.
func (o *opts) annotate(ctx context.Context, store *dedupe.Store, rd *control.Redrives, letters []deadLetter) error {
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
	redrives, err := rd.List(ctx, o.dlqTopic)
	if err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	for i := range letters {
		d := &letters[i]
		if st, ok := states[d.WindowID]; ok {
			d.WindowState = &windowState{Status: st.Status, Token: st.Token, Attempts: st.Attempts, Holder: st.Holder, UpdatedAt: st.UpdatedAt.UTC()}
		}
		if r, ok := redrives[d.letter(o.dlqTopic)]; ok {
			d.Redriven = &r
		}
	}
	return nil
}

func parseDLQID(s string) (int32, int64, error) {
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

// readDLQ reads every record of the dead-letter topic.
func (o *opts) readDLQ(ctx context.Context) ([]deadLetter, error) {
	cl, err := kgo.NewClient(o.kgoOpts()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, o.dlqTopic)
	if err != nil {
		return nil, fmt.Errorf("dlq: %s: %w", o.dlqTopic, err)
	}
	if t, ok := td[o.dlqTopic]; !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("dlq: dead-letter topic %s does not exist (a worker creates it when it starts; check --dlq-topic and --topic): %w", o.dlqTopic, errNotFound)
	}
	starts, err := adm.ListStartOffsets(ctx, o.dlqTopic)
	if err != nil {
		return nil, fmt.Errorf("dlq: %s: %w", o.dlqTopic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, o.dlqTopic)
	if err != nil {
		return nil, fmt.Errorf("dlq: %s: %w", o.dlqTopic, err)
	}
	var out []deadLetter
	var rerr error
	ends.Each(func(e kadm.ListedOffset) {
		if rerr != nil || e.Err != nil {
			return
		}
		s, _ := starts.Lookup(e.Topic, e.Partition)
		recs, err := kread.Range(ctx, o.kgoOpts(), o.dlqTopic, e.Partition, s.Offset, e.Offset)
		if err != nil {
			rerr = fmt.Errorf("dlq: %w", err)
			return
		}
		for _, r := range recs {
			out = append(out, parseDeadLetter(r))
		}
	})
	slices.SortFunc(out, func(a, b deadLetter) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out, rerr
}

// oneLine is s for a table cell: whitespace runs collapsed, made safe,
// cut to about n bytes.
func oneLine(s string, n int) string {
	s = safe(strings.Join(strings.Fields(s), " "))
	if len(s) > n {
		i := n - 3
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "..."
	}
	if s == "" {
		return "-"
	}
	return s
}

func windowName(d deadLetter) string {
	if d.WindowID == "" {
		return "(undecodable, key " + oneLine(d.Job, 20) + ")"
	}
	return safe(d.WindowID)
}

func stateCell(d deadLetter) string {
	if d.WindowID == "" {
		return "-"
	}
	return safe(d.WindowState.String())
}

func redrivenCell(r *control.Redrive) string {
	switch {
	case r == nil:
		return "-"
	case r.With != "":
		return fmtTime(r.At) + " with " + safe(r.With)
	case r.Topic == "":
		return fmtTime(r.At) + " (unconfirmed)"
	}
	return fmtTime(r.At)
}

func renderDLQList(w io.Writer, ls []deadLetter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWINDOW\tATTEMPTS\tDEAD-LETTERED\tORIGIN\tWINDOW STATE\tREDRIVEN\tREASON")
	for _, d := range ls {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", d.ID, windowName(d), d.Attempts, fmtTime(d.At), safe(d.Origin), stateCell(d), redrivenCell(d.Redriven), oneLine(d.Reason, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s\n", plural(len(ls), "dead letter"))
	return err
}

// maxShownValue bounds the undecodable value dlq show prints.
const maxShownValue = 4 << 10

func renderDLQShow(w io.Writer, d deadLetter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID:\t%s\n", d.ID)
	fmt.Fprintf(tw, "Window:\t%s\n", orDash(d.WindowID))
	fmt.Fprintf(tw, "Job:\t%s\n", orDash(d.Job))
	fmt.Fprintf(tw, "Reason:\t%s\n", orDash(d.Reason))
	fmt.Fprintf(tw, "Origin:\t%s\n", safe(d.Origin))
	fmt.Fprintf(tw, "Attempts:\t%d\n", d.Attempts)
	fmt.Fprintf(tw, "Worker:\t%s\n", orDash(d.Worker))
	fmt.Fprintf(tw, "Dead-lettered:\t%s\n", fmtTime(d.At))
	if d.Incomplete != "" {
		fmt.Fprintf(tw, "Incomplete:\t%s; the original (%d bytes, sha256 %s) is at %s while that topic retains it\n",
			d.Incomplete, d.ValueSize, orDash(d.ValueSHA256), safe(d.Origin))
	}
	if d.LetterError != "" {
		fmt.Fprintf(tw, "Malformed:\t%s\n", safe(d.LetterError))
	}
	switch ws := d.WindowState; {
	case d.WindowID == "":
	case ws == nil:
		fmt.Fprintf(tw, "Window state:\tnone (no record in Redis: never claimed, expired, or cleared)\n")
	default:
		fmt.Fprintf(tw, "Window state:\t%s (token %d, attempt %d, %s, since %s)\n", safe(ws.Status), ws.Token, ws.Attempts, orDash(ws.Holder), fmtTime(ws.UpdatedAt))
	}
	if r := d.Redriven; r != nil {
		fmt.Fprintf(tw, "Redriven:\t%s by %s%s\n", fmtTime(r.At), orDash(r.By), safe(redriveTarget(r)))
	} else {
		fmt.Fprintf(tw, "Redriven:\tno\n")
	}
	tw.Flush()
	keys := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintln(w, "Headers:")
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", safe(k), oneLine(d.Headers[k], 200))
	}
	if d.DecodeError != "" {
		v, more := d.Value, ""
		if len(v) > maxShownValue {
			v, more = v[:maxShownValue], fmt.Sprintf(" (first %d bytes shown)", maxShownValue)
		}
		fmt.Fprintf(w, "Value (undecodable: %s)%s:\n  %s\n", safe(d.DecodeError), more, safe(v))
		return nil
	}
	fmt.Fprintln(w, "Payload:")
	var pretty any
	if json.Unmarshal(d.Payload, &pretty) == nil {
		b, _ := json.MarshalIndent(pretty, "  ", "  ")
		fmt.Fprintf(w, "  %s\n", safeLines(string(b)))
	}
	return nil
}

// orDash is s made safe, or "-" if it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return safe(s)
}
