package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/ops/operator"
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

// The dead letters, their parsing (internal/store/dlq), planning and redrive live in
// internal/ops/operator, which the dashboard's actions use too; kjobctl renders them,
// every text from a record made safe.
type (
	deadLetter  = operator.DeadLetter
	windowState = operator.WindowState
	redriveItem = operator.RedriveItem
)

func parseDeadLetter(r *kgo.Record) deadLetter { return operator.ParseDeadLetter(r) }

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
	op, err := o.operator(nil, nil)
	if err != nil {
		return err
	}
	letters, err := op.DeadLetters(cctx)
	if errors.Is(err, operator.ErrNoTopic) {
		err = fmt.Errorf("%w; check --dlq-topic and --topic", err)
	}
	if err != nil {
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
	if op, err = o.operator(nil, cl); err != nil {
		return err
	}
	out, err := op.ExecuteRedrive(cctx, items, force, "kjobctl "+kjob.DefaultID())
	if err != nil {
		return fmt.Errorf("dlq redrive: %w", err)
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

func planRedrive(chosen []deadLetter, force bool) []redriveItem {
	return operator.PlanRedrive(chosen, force)
}

func redriveTarget(r *operator.Redrive) string { return operator.RedriveTarget(r) }

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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.ID, windowName(it.DeadLetter), stateCell(it.DeadLetter), safe(action))
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

func parseDLQID(s string) (int32, int64, error) { return operator.ParseDeadLetterID(s) }

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

func redrivenCell(r *operator.Redrive) string {
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", d.ID, windowName(d), d.Attempts, fmtTime(d.At), safe(d.Origin.String()), stateCell(d), redrivenCell(d.Redriven), oneLine(d.Reason, 60))
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
	fmt.Fprintf(tw, "Origin:\t%s\n", safe(d.Origin.String()))
	fmt.Fprintf(tw, "Attempts:\t%d\n", d.Attempts)
	fmt.Fprintf(tw, "Worker:\t%s\n", orDash(d.Worker))
	fmt.Fprintf(tw, "Dead-lettered:\t%s\n", fmtTime(d.At))
	if d.Incomplete != "" {
		fmt.Fprintf(tw, "Incomplete:\t%s; the original (%d bytes, sha256 %s) is at %s while that topic retains it\n",
			d.Incomplete, d.ValueSize, orDash(d.ValueSHA256), safe(d.Origin.String()))
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
	keys := make([]string, 0, len(d.RecordHeaders))
	for k := range d.RecordHeaders {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprintln(w, "Headers:")
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", safe(k), oneLine(d.RecordHeaders[k], 200))
	}
	if d.DecodeError != "" {
		v, more := string(d.Value), ""
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
