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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/cli"
	"github.com/kjob/kjob/internal/kread"
	"github.com/kjob/kjob/pkg/jobmsg"
	"github.com/kjob/kjob/pkg/worker"
)

const dlqUsage = `kjobctl dlq: inspect dead letters and republish chosen ones.

Usage:
  kjobctl dlq list [flags]                         one line per dead letter
  kjobctl dlq show ID [flags]                      reason, origin, attempts, headers and payload
  kjobctl dlq redrive (ID... | --all) [--execute]  republish to the windows topic (dry run without --execute)

A dead letter's ID is its offset in the dead-letter topic (partition 0), as
"kjobctl dlq list" prints it. A redriven window gets a fresh start: its record
in Redis (attempt count, last error) is cleared before it is republished.`

// deadLetter is one record of the dead-letter topic.
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

	rec *kgo.Record
}

func parseDeadLetter(r *kgo.Record) deadLetter {
	d := deadLetter{ID: strconv.FormatInt(r.Offset, 10), Partition: r.Partition, Offset: r.Offset, Headers: map[string]string{}, rec: r}
	if r.Partition != 0 {
		d.ID = fmt.Sprintf("%d:%d", r.Partition, r.Offset)
	}
	var topic, part, off string
	for _, h := range r.Headers {
		v := string(h.Value)
		d.Headers[h.Key] = v
		switch h.Key {
		case worker.HeaderDLQReason:
			d.Reason = v
		case worker.HeaderDLQTopic:
			topic = v
		case worker.HeaderDLQPartition:
			part = v
		case worker.HeaderDLQOffset:
			off = v
		case worker.HeaderDLQAttempts:
			d.Attempts, _ = strconv.Atoi(v)
		case worker.HeaderDLQWorker:
			d.Worker = v
		case worker.HeaderDLQTime:
			d.At, _ = time.Parse(time.RFC3339Nano, v)
		}
	}
	d.Origin = fmt.Sprintf("%s[%s]@%s", topic, part, off)
	if m, err := jobmsg.Unmarshal(r.Value); err == nil {
		d.WindowID, d.Job, d.Payload = m.ID, m.Job, m.Payload
	} else {
		d.DecodeError = err.Error()
		d.Value = string(r.Value)
		d.Job = string(r.Key)
	}
	return d
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
	var all, execute bool
	f := cli.NewFlags("dlq "+sub, dlqUsage)
	f.SetOutput(stderr)
	o.register(f)
	if sub == "redrive" {
		f.Bool(&all, "all", "", false, "redrive every dead letter")
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
	var chosen []deadLetter
	if all {
		chosen = letters
	}
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
	// redrive
	if !execute {
		if o.output == "json" {
			if err := writeJSON(stdout, map[string]any{"executed": false, "redrive": chosen}); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(stdout, "Would redrive %d dead letters:\n", len(chosen))
			renderDLQList(stdout, chosen)
		}
		return fmt.Errorf("dlq redrive: %w", errDryRun)
	}
	store, err := o.store()
	if err != nil {
		return err
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
	var out []redriven
	for _, d := range chosen {
		topic := d.Headers[worker.HeaderDLQTopic]
		if topic == "" {
			topic = o.topic
		}
		var hs []kgo.RecordHeader
		for _, h := range d.rec.Headers {
			if !strings.HasPrefix(h.Key, "kjob-dlq-") {
				hs = append(hs, h)
			}
		}
		if d.WindowID != "" {
			// A fresh start: attempts and last error are cleared (the
			// job's token counter is kept, so fencing still holds).
			if err := store.Forget(cctx, d.WindowID); err != nil {
				return fmt.Errorf("dlq redrive: %w", err)
			}
		}
		rec := &kgo.Record{Topic: topic, Key: d.rec.Key, Value: d.rec.Value, Headers: hs}
		if err := cl.ProduceSync(cctx, rec).FirstErr(); err != nil {
			return fmt.Errorf("dlq redrive: republish %s to %s (after %d redriven): %w", d.ID, topic, len(out), err)
		}
		out = append(out, redriven{ID: d.ID, WindowID: d.WindowID, Partition: rec.Partition, Offset: rec.Offset})
	}
	if o.output == "json" {
		return writeJSON(stdout, map[string]any{"executed": true, "redriven": out})
	}
	fmt.Fprintf(stdout, "Redrove %d dead letters (they stay in %s):\n", len(out), o.dlqTopic)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWINDOW\tREPUBLISHED AT")
	for _, r := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s[%d]@%d\n", r.ID, r.WindowID, o.topic, r.Partition, r.Offset)
	}
	return tw.Flush()
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

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n-3] + "..."
	}
	if s == "" {
		return "-"
	}
	return s
}

func renderDLQList(w io.Writer, ls []deadLetter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWINDOW\tATTEMPTS\tDEAD-LETTERED\tORIGIN\tREASON")
	for _, d := range ls {
		win := d.WindowID
		if win == "" {
			win = "(undecodable, key " + oneLine(d.Job, 20) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", d.ID, win, d.Attempts, fmtTime(d.At), d.Origin, oneLine(d.Reason, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d dead letters\n", len(ls))
	return err
}

func renderDLQShow(w io.Writer, d deadLetter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID:\t%s\n", d.ID)
	fmt.Fprintf(tw, "Window:\t%s\n", orDash(d.WindowID))
	fmt.Fprintf(tw, "Job:\t%s\n", orDash(d.Job))
	fmt.Fprintf(tw, "Reason:\t%s\n", orDash(d.Reason))
	fmt.Fprintf(tw, "Origin:\t%s\n", d.Origin)
	fmt.Fprintf(tw, "Attempts:\t%d\n", d.Attempts)
	fmt.Fprintf(tw, "Worker:\t%s\n", orDash(d.Worker))
	fmt.Fprintf(tw, "Dead-lettered:\t%s\n", fmtTime(d.At))
	tw.Flush()
	keys := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintln(w, "Headers:")
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", k, oneLine(d.Headers[k], 200))
	}
	if d.DecodeError != "" {
		fmt.Fprintf(w, "Value (undecodable: %s):\n  %s\n", d.DecodeError, d.Value)
		return nil
	}
	fmt.Fprintln(w, "Payload:")
	var pretty any
	if json.Unmarshal(d.Payload, &pretty) == nil {
		b, _ := json.MarshalIndent(pretty, "  ", "  ")
		fmt.Fprintf(w, "  %s\n", b)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
