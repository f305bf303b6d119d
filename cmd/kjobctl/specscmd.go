package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/store/specs"
	"github.com/kjob/kjob/schedule"
)

// defaultMaxJobs bounds one apply (--max-jobs raises it).
const defaultMaxJobs = 100_000

// specOpts are the flags of the schedule subcommands that talk to the
// schedules topic.
type specOpts struct {
	opts
	note    string
	execute bool
	wait    time.Duration
}

func (s *specOpts) register(f *cli.Flags, withExecute bool) {
	s.opts.register(f)
	f.String(&s.note, "note", "", "", "why: recorded with the change in the change log")
	f.Duration(&s.wait, "wait", "", specs.DefaultWait, "how long to wait for the producer leader's answer (at most 30s)")
	if withExecute {
		f.Bool(&s.execute, "execute", "", false, "apply the change (without it: print the plan and change nothing)")
	}
}

// connect returns a client whose changes come from src (kjobctl's own when
// src.Kind is empty) and the context of the command's Kafka calls.
func (s *specOpts) connect(ctx context.Context, src specs.Source) (*specs.Client, context.Context, context.CancelFunc, error) {
	c, err := s.client(src)
	if err != nil {
		return nil, nil, nil, err
	}
	cctx, cancel := s.ctx(ctx)
	return c, cctx, cancel, nil
}

func (s *specOpts) client(src specs.Source) (*specs.Client, error) {
	if src.Kind == "" {
		src.Kind = specs.SourceCLI
	}
	c, err := specs.NewClient(specs.ClientConfig{Opts: s.kgoOpts(), Deployment: s.deployment(), Actor: s.actor(), Source: src, Wait: s.wait})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errUsage)
	}
	return c, nil
}

// specErr maps the client's errors to kjobctl's exit codes.
func specErr(cmd string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, specs.ErrConflict):
		return fmt.Errorf("%s: %w: %w", cmd, err, errConflict)
	case errors.Is(err, specs.ErrNotFound):
		return fmt.Errorf("%s: %w: %w", cmd, err, errNotFound)
	}
	return fmt.Errorf("%s: %w", cmd, err)
}

// ago says how long before now t was: "2 h ago".
func ago(t time.Time) string {
	d := nowFunc().Sub(t)
	switch {
	case t.IsZero():
		return "at an unknown time"
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%d days ago", int(d/(24*time.Hour)))
}

// thousands formats n as 19,990.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// PlanItem is one job of an apply plan.
type PlanItem struct {
	Job     string            `json:"job"`
	Kind    string            `json:"kind"` // add, change, delete, unchanged, kept
	From    int64             `json:"version"`
	Diff    []specs.FieldDiff `json:"diff,omitempty"`
	Reverts string            `json:"reverts,omitempty"`
	spec    *schedule.Spec
}

// ApplyPlan is what schedule apply would do.
type ApplyPlan struct {
	File      string     `json:"file"`
	Hash      string     `json:"hash"`
	Added     []PlanItem `json:"added"`
	Changed   []PlanItem `json:"changed"`
	Deleted   []PlanItem `json:"deleted"`
	Unchanged []PlanItem `json:"unchanged"`
	// Kept are the topic's jobs not in the file, left alone without --prune.
	Kept     []PlanItem      `json:"kept"`
	Executed bool            `json:"executed"`
	Applied  []specs.Applied `json:"applied,omitempty"`
}

// planApply compares file (validated) with the topic's snapshot. It is
// pure: no I/O.
func planApply(file *schedule.File, hash string, snap *specs.Snapshot, prune bool) *ApplyPlan {
	p := &ApplyPlan{File: file.Path, Hash: hash, Added: []PlanItem{}, Changed: []PlanItem{}, Deleted: []PlanItem{}, Unchanged: []PlanItem{}, Kept: []PlanItem{}}
	inFile := map[string]bool{}
	var cur []schedule.Spec
	for _, r := range snap.Jobs {
		cur = append(cur, r.Spec)
	}
	curJobs, _ := jobsOfSpecs("schedules topic", cur)
	canon := map[string]schedule.Spec{}
	for _, j := range curJobs {
		canon[j.Name] = j.ToSpec()
	}
	for _, j := range file.Jobs {
		inFile[j.Name] = true
		s := j.ToSpec()
		r, ok := snap.Jobs[j.Name]
		if !ok {
			p.Added = append(p.Added, PlanItem{Job: j.Name, Kind: "add", Diff: specs.Diff(nil, nil, &s, nil), spec: &s})
			continue
		}
		before, ok := canon[j.Name]
		if !ok {
			before = r.Spec // does not validate any more: compare as written
		}
		d := specs.Diff(&before, nil, &s, nil)
		if len(d) == 0 {
			p.Unchanged = append(p.Unchanged, PlanItem{Job: j.Name, Kind: "unchanged", From: r.Version})
			continue
		}
		it := PlanItem{Job: j.Name, Kind: "change", From: r.Version, Diff: d, spec: &s}
		if !(r.Source.Kind == specs.SourceFile && r.Source.File == file.Path) {
			it.Reverts = fmt.Sprintf("reverts v%d, set by %s through %s %s", r.Version, r.SetBy, specs.DescribeSource(r.Source), ago(r.SetAt))
		}
		p.Changed = append(p.Changed, it)
	}
	for _, name := range snap.Names() {
		if inFile[name] {
			continue
		}
		r := snap.Jobs[name]
		it := PlanItem{Job: name, Kind: "kept", From: r.Version}
		if prune {
			it.Kind = "delete"
			it.Diff = specs.Diff(&r.Spec, nil, nil, nil)
			p.Deleted = append(p.Deleted, it)
		} else {
			p.Kept = append(p.Kept, it)
		}
	}
	return p
}

// edits are the plan's changes, each expecting the version the plan saw.
func (p *ApplyPlan) edits() []specs.Edit {
	var out []specs.Edit
	v := func(n int64) *int64 { return &n }
	for _, it := range p.Added {
		out = append(out, specs.Edit{Op: specs.OpPut, Job: it.Job, Spec: it.spec, ExpectVersion: v(0), FileHash: specs.Hash(*it.spec)})
	}
	for _, it := range p.Changed {
		out = append(out, specs.Edit{Op: specs.OpPut, Job: it.Job, Spec: it.spec, ExpectVersion: v(it.From), FileHash: specs.Hash(*it.spec)})
	}
	for _, it := range p.Deleted {
		out = append(out, specs.Edit{Op: specs.OpDelete, Job: it.Job, ExpectVersion: v(it.From)})
	}
	return out
}

func renderPlan(w io.Writer, p *ApplyPlan, topic string) {
	h := p.Hash
	if len(h) > 8 {
		h = h[:8]
	}
	fmt.Fprintf(w, "Plan: %s (sha256 %s) against %s\n", safe(p.File), h, topic)
	section := func(mark, title string, items []PlanItem, detail bool) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s (%s):\n", title, thousands(len(items)))
		for i, it := range items {
			if i == maxListed {
				fmt.Fprintf(w, "  ... and %s more\n", thousands(len(items)-maxListed))
				break
			}
			ver := ""
			if it.From > 0 {
				ver = fmt.Sprintf(" (v%d)", it.From)
			}
			fmt.Fprintf(w, "  %s %s%s\n", mark, safe(it.Job), ver)
			if !detail {
				continue
			}
			for _, d := range it.Diff {
				fmt.Fprintf(w, "      %s: %s -> %s\n", d.Field, quoteOr(d.Before), quoteOr(d.After))
			}
			if it.Reverts != "" {
				fmt.Fprintf(w, "      ! %s\n", safe(it.Reverts))
			}
		}
	}
	section("+", "Add", p.Added, false)
	section("~", "Change", p.Changed, true)
	section("-", "Delete", p.Deleted, false)
	fmt.Fprintf(w, "\n%s to add, %s to change, %s to delete, %s unchanged", thousands(len(p.Added)), thousands(len(p.Changed)), thousands(len(p.Deleted)), thousands(len(p.Unchanged)))
	if len(p.Kept) > 0 {
		fmt.Fprintf(w, "; %s in the topic but not in the file kept (--prune deletes them)", thousands(len(p.Kept)))
	}
	fmt.Fprintln(w)
}

func quoteOr(s string) string {
	if s == "" {
		return "(none)"
	}
	return strconv.Quote(s)
}

const applyUsage = `kjobctl schedule apply: make the schedules topic match a schedules file.
It validates FILE as the producer does, reads the topic and prints a plan:
the jobs to add, to change (a field diff; a change that overwrites a
version another actor or source set is named: "reverts v7, set by alice
through the dashboard 2 h ago"), to delete (only with --prune) and those
unchanged. Nothing changes without --execute; with it, the changes are
sent to the producer leader in batches, each expecting the version the
plan saw, so a change made meanwhile is a conflict (exit 5), not a lost
update. At most --max-jobs jobs per apply.

Usage: kjobctl schedule apply -f FILE [--prune] [--note N] [--execute] [flags]`

func scheduleApply(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s specOpts
	var file string
	var prune bool
	var maxJobs int
	f := cli.NewFlags("kjobctl schedule apply", applyUsage)
	f.SetOutput(stdout)
	s.register(f, true)
	f.String(&file, "f", "", "", "the schedules file (YAML)")
	f.Bool(&prune, "prune", "", false, "also delete the topic's jobs that are not in the file")
	f.Int(&maxJobs, "max-jobs", "", defaultMaxJobs, "refuse an apply of more jobs (or changes) than this")
	pos, err := f.ParseInterspersed(args)
	if err != nil {
		return err
	}
	if file == "" && len(pos) == 1 {
		file, pos = pos[0], nil
	}
	if file == "" || len(pos) != 0 {
		return fmt.Errorf("schedule apply: want -f FILE: %w", errUsage)
	}
	if err := s.setup(); err != nil {
		return err
	}
	defer s.close()
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("schedule apply: %w", err)
	}
	sf, err := schedule.Parse(file, data)
	if err != nil {
		return err
	}
	if len(sf.Jobs) > maxJobs {
		return fmt.Errorf("schedule apply: %s has %s jobs, more than --max-jobs %s; split the file, or raise --max-jobs: %w",
			file, thousands(len(sf.Jobs)), thousands(maxJobs), errUsage)
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	c, cctx, cancel, err := s.connect(ctx, specs.Source{Kind: specs.SourceFile, File: file, Hash: hash})
	if err != nil {
		return err
	}
	defer cancel()
	snap, err := c.Snapshot(cctx)
	if err != nil {
		return fmt.Errorf("schedule apply: %w", err)
	}
	p := planApply(sf, hash, snap, prune)
	edits := p.edits()
	if len(edits) > maxJobs {
		return fmt.Errorf("schedule apply: %s changes, more than --max-jobs %s; raise --max-jobs: %w", thousands(len(edits)), thousands(maxJobs), errUsage)
	}
	topic := s.deployment().WithDefaults().SchedulesTopic()
	if !s.execute || len(edits) == 0 {
		if s.output == "json" {
			if err := writeJSON(stdout, p); err != nil {
				return err
			}
		} else {
			renderPlan(stdout, p, topic)
		}
		if len(edits) == 0 {
			return nil
		}
		return fmt.Errorf("schedule apply: %w", errDryRun)
	}
	if s.output != "json" {
		renderPlan(stdout, p, topic)
	}
	res, err := c.SubmitAll(cctx, edits, s.note)
	for _, r := range res {
		p.Applied = append(p.Applied, r.Applied...)
	}
	p.Executed = err == nil
	if s.output == "json" {
		if werr := writeJSON(stdout, p); werr != nil {
			return werr
		}
	} else {
		fmt.Fprintf(stdout, "\nApplied %s of %s changes", thousands(len(p.Applied)), thousands(len(edits)))
		if err == nil {
			fmt.Fprint(stdout, ".")
		} else {
			fmt.Fprint(stdout, "; the rest were not (see the error).")
		}
		fmt.Fprintln(stdout)
		for i, a := range p.Applied {
			if i == maxListed {
				fmt.Fprintf(stdout, "  ... and %s more\n", thousands(len(p.Applied)-maxListed))
				break
			}
			fmt.Fprintf(stdout, "  %s %s: v%d -> v%d\n", a.Op, safe(a.Job), a.VersionBefore, a.VersionAfter)
		}
	}
	return specErr("schedule apply", err)
}

// oneJob parses the flags of a subcommand that takes one JOB.
func oneJob(cmd, usage string, args []string, stdout io.Writer, withExecute bool, extra func(*cli.Flags)) (*specOpts, string, error) {
	s := &specOpts{}
	f := cli.NewFlags("kjobctl schedule "+cmd, usage)
	f.SetOutput(stdout)
	s.register(f, withExecute)
	if extra != nil {
		extra(f)
	}
	pos, err := f.ParseInterspersed(args)
	if err != nil {
		return nil, "", err
	}
	if len(pos) != 1 {
		return nil, "", fmt.Errorf("schedule %s: want exactly one JOB argument, got %d: %w", cmd, len(pos), errUsage)
	}
	if err := s.setup(); err != nil {
		return nil, "", err
	}
	return s, pos[0], nil
}

func renderRecord(w io.Writer, r *specs.Record) {
	fmt.Fprintf(w, "Job:        %s\nVersion:    %d\nSet by:     %s through %s at %s (%s)\n", safe(r.Job), r.Version, safe(r.SetBy), safe(specs.DescribeSource(r.Source)), fmtTime(r.SetAt), ago(r.SetAt))
	if r.Note != "" {
		fmt.Fprintf(w, "Note:       %s\n", safe(r.Note))
	}
	if r.Paused != nil {
		fmt.Fprintf(w, "Paused:     since %s by %s: %s\n", fmtTime(r.Paused.At), safe(r.Paused.By), safe(r.Paused.Note))
	}
	fmt.Fprintf(w, "Effective:  from %s\n", fmtTime(r.EffectiveFrom))
	fmt.Fprintln(w, "Spec:")
	m := specs.Flatten(&r.Spec, nil)
	for _, k := range specs.Fields {
		if v, ok := m[k]; ok {
			fmt.Fprintf(w, "  %s: %s\n", k, safe(v))
		}
	}
}

func scheduleGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, job, err := oneJob("get", "kjobctl schedule get: print JOB's current spec and version.\n\nUsage: kjobctl schedule get JOB [flags]", args, stdout, false, nil)
	if err != nil {
		return err
	}
	defer s.close()
	c, cctx, cancel, err := s.connect(ctx, specs.Source{})
	if err != nil {
		return err
	}
	defer cancel()
	r, err := c.Get(cctx, job)
	if err != nil {
		return specErr("schedule get", err)
	}
	if s.output == "json" {
		return writeJSON(stdout, r)
	}
	renderRecord(stdout, r)
	return nil
}

func scheduleList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s specOpts
	f := cli.NewFlags("kjobctl schedule list", "kjobctl schedule list: the jobs of the schedules topic.\n\nUsage: kjobctl schedule list [flags]")
	f.SetOutput(stdout)
	s.register(f, false)
	if err := f.Parse(args); err != nil {
		return err
	}
	if err := s.setup(); err != nil {
		return err
	}
	defer s.close()
	c, cctx, cancel, err := s.connect(ctx, specs.Source{})
	if err != nil {
		return err
	}
	defer cancel()
	snap, err := c.Snapshot(cctx)
	if err != nil {
		return fmt.Errorf("schedule list: %w", err)
	}
	for _, m := range snap.Malformed {
		fmt.Fprintf(stderr, "kjobctl: warning: skipped %s\n", safe(m.Error()))
	}
	recs := make([]*specs.Record, 0, len(snap.Jobs))
	for _, n := range snap.Names() {
		recs = append(recs, snap.Jobs[n])
	}
	if s.output == "json" {
		return writeJSON(stdout, recs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tVERSION\tSCHEDULE\tHANDLER\tSTATE\tSET BY\tSOURCE\tSET AT")
	for _, r := range recs {
		state := "enabled"
		switch {
		case r.Paused != nil:
			state = "paused"
		case r.Spec.Enabled != nil && !*r.Spec.Enabled:
			state = "disabled"
		}
		sched := r.Spec.Schedule
		if sched == "" {
			sched = "at " + r.Spec.At
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(r.Job), r.Version, safe(sched), safe(r.Spec.Handler), state, safe(r.SetBy), safe(specs.DescribeSource(r.Source)), fmtTime(r.SetAt))
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%s in %s\n", plural(len(recs), "job"), s.deployment().WithDefaults().SchedulesTopic())
	return nil
}

func scheduleHistory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, job, err := oneJob("history", "kjobctl schedule history: JOB's versions from the change log: op, actor, source, time, note and diff.\n\nUsage: kjobctl schedule history JOB [flags]", args, stdout, false, nil)
	if err != nil {
		return err
	}
	defer s.close()
	c, cctx, cancel, err := s.connect(ctx, specs.Source{})
	if err != nil {
		return err
	}
	defer cancel()
	hs, err := c.History(cctx, job)
	if err != nil {
		return fmt.Errorf("schedule history: %w", err)
	}
	if len(hs) == 0 {
		return fmt.Errorf("schedule history: no changes of job %q in %s: %w", job, s.deployment().WithDefaults().ScheduleLogTopic(), errNotFound)
	}
	if s.output == "json" {
		return writeJSON(stdout, hs)
	}
	for _, h := range hs {
		fmt.Fprintf(stdout, "v%d  %s  by %s through %s at %s", h.VersionAfter, h.Op, safe(h.Actor), safe(specs.DescribeSource(h.Source)), fmtTime(h.At))
		if h.Note != "" {
			fmt.Fprintf(stdout, "  note: %s", safe(h.Note))
		}
		fmt.Fprintln(stdout)
		for _, d := range h.Diff {
			fmt.Fprintf(stdout, "    %s: %s -> %s\n", d.Field, safe(quoteOr(d.Before)), safe(quoteOr(d.After)))
		}
	}
	return nil
}

// submitOne sends one edit and prints what it did.
func (s *specOpts) submitOne(ctx context.Context, c *specs.Client, cmd string, e specs.Edit, stdout io.Writer) error {
	res, err := c.Submit(ctx, []specs.Edit{e}, s.note)
	if err != nil {
		return specErr("schedule "+cmd, err)
	}
	if s.output == "json" {
		return writeJSON(stdout, res)
	}
	for _, a := range res.Applied {
		fmt.Fprintf(stdout, "%s %s: v%d -> v%d (by %s, leader %s)\n", a.Op, safe(a.Job), a.VersionBefore, a.VersionAfter, safe(c.Actor()), safe(res.Leader))
	}
	return nil
}

func scheduleDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, job, err := oneJob("delete", "kjobctl schedule delete: delete JOB (a tombstone; its versions continue if it is re-created). Dry run unless --execute.\n\nUsage: kjobctl schedule delete JOB [--note N] [--execute] [flags]", args, stdout, true, nil)
	if err != nil {
		return err
	}
	defer s.close()
	c, cctx, cancel, err := s.connect(ctx, specs.Source{})
	if err != nil {
		return err
	}
	defer cancel()
	r, err := c.Get(cctx, job)
	if err != nil {
		return specErr("schedule delete", err)
	}
	if !s.execute {
		fmt.Fprintf(stdout, "would delete %s (v%d, set by %s through %s %s)\n", safe(job), r.Version, safe(r.SetBy), safe(specs.DescribeSource(r.Source)), ago(r.SetAt))
		return fmt.Errorf("schedule delete: %w", errDryRun)
	}
	v := r.Version
	return s.submitOne(cctx, c, "delete", specs.Edit{Op: specs.OpDelete, Job: job, ExpectVersion: &v}, stdout)
}

func scheduleRevert(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var to int64
	var toInt int
	s, job, err := oneJob("revert", "kjobctl schedule revert: set JOB back to the spec it had at --to-version, as a new version. Dry run unless --execute.\n\nUsage: kjobctl schedule revert JOB --to-version N [--note N] [--execute] [flags]", args, stdout, true,
		func(f *cli.Flags) { f.Int(&toInt, "to-version", "", 0, "the version to go back to") })
	if err != nil {
		return err
	}
	defer s.close()
	to = int64(toInt)
	if to < 1 {
		return fmt.Errorf("schedule revert: --to-version %d: want a version >= 1 (see kjobctl schedule history %s): %w", to, job, errUsage)
	}
	c, cctx, cancel, err := s.connect(ctx, specs.Source{})
	if err != nil {
		return err
	}
	defer cancel()
	r, err := c.Get(cctx, job)
	if err != nil {
		return specErr("schedule revert", err)
	}
	hs, err := c.History(cctx, job)
	if err != nil {
		return fmt.Errorf("schedule revert: %w", err)
	}
	i := slices.IndexFunc(hs, func(h *specs.Change) bool { return h.VersionAfter == to && h.Spec != nil })
	if i < 0 {
		return fmt.Errorf("schedule revert: job %q has no version %d with a spec in the change log (see kjobctl schedule history %s): %w", job, to, job, errNotFound)
	}
	d := specs.Diff(&r.Spec, nil, hs[i].Spec, nil)
	if !s.execute {
		fmt.Fprintf(stdout, "would revert %s from v%d to the spec of v%d (as v%d):\n", safe(job), r.Version, to, r.Version+1)
		for _, x := range d {
			fmt.Fprintf(stdout, "    %s: %s -> %s\n", x.Field, safe(quoteOr(x.Before)), safe(quoteOr(x.After)))
		}
		return fmt.Errorf("schedule revert: %w", errDryRun)
	}
	v := r.Version
	return s.submitOne(cctx, c, "revert", specs.Edit{Op: specs.OpRevert, Job: job, ToVersion: to, ExpectVersion: &v}, stdout)
}

// schedulePauseResume pauses or resumes JOB through the producer leader:
// versioned and audited like every other change.
func schedulePauseResume(ctx context.Context, cmd string, args []string, stdout io.Writer) error {
	usage := "kjobctl schedule pause: stop JOB's windows until resumed (a new version, in the change log). --note is required.\n\nUsage: kjobctl schedule pause JOB --note N [flags]"
	if cmd == "resume" {
		usage = "kjobctl schedule resume: publish JOB's windows again from the next one (no catch-up).\n\nUsage: kjobctl schedule resume JOB [--note N] [flags]"
	}
	s, job, err := oneJob(cmd, usage, args, stdout, false, nil)
	if err != nil {
		return err
	}
	defer s.close()
	if cmd == "pause" && strings.TrimSpace(s.note) == "" {
		return fmt.Errorf("pause: --note is required: say why %s is paused: %w", job, errUsage)
	}
	c, cctx, cancel, err := s.connect(ctx, specs.Source{})
	if err != nil {
		return err
	}
	defer cancel()
	r, err := c.Get(cctx, job)
	if err != nil {
		return specErr(cmd, err)
	}
	switch {
	case cmd == "pause" && r.Paused != nil:
		return fmt.Errorf("pause: job %s is already paused (since %s by %s: %s): %w", job, fmtTime(r.Paused.At), safe(r.Paused.By), safe(r.Paused.Note), errConflict)
	case cmd == "resume" && r.Paused == nil:
		return fmt.Errorf("resume: job %s is not paused: %w", job, errConflict)
	}
	v := r.Version
	op := specs.OpPause
	if cmd == "resume" {
		op = specs.OpResume
	}
	return s.submitOne(cctx, c, cmd, specs.Edit{Op: op, Job: job, Note: s.note, ExpectVersion: &v}, stdout)
}
