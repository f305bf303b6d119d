package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/base/names"
	"github.com/kjob/kjob/internal/ops/operator"
	"github.com/kjob/kjob/internal/store/jobmsg"
	"github.com/kjob/kjob/schedule"
)

// publisher produces window records partitioned as the producer does
// (murmur2 of the job name), so a job's windows stay on one partition.
func (o *opts) publisher() (*kgo.Client, error) { return o.producerClient(o.sign) }

// redriver is the client that republishes dead letters: unlike publisher
// it never signs. A redriven record keeps the headers it had, so one that
// was signed stays validly signed, and one dead-lettered for a missing or
// bad signature is not laundered by an operator's key.
func (o *opts) redriver() (*kgo.Client, error) { return o.producerClient(nil) }

// producerClient never lets the broker create a topic it produces to: a
// misspelt --topic on a broker with auto.create.topics.enable would create
// a stray one-partition topic. checkTopic refuses a missing one instead.
func (o *opts) producerClient(sign func(*kgo.Record) error) (*kgo.Client, error) {
	opts := append(o.kgoOpts(),
		kgo.RecordPartitioner(names.Partitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	if sign != nil {
		opts = append(opts, kgo.WithHooks(signHook(sign)))
	}
	return kgo.NewClient(opts...)
}

// probeTimeout bounds checkTopic's one metadata request: a broker that
// does not answer within it is reported as unreachable, rather than the
// command waiting its whole --timeout for a produce that cannot start.
const probeTimeout = 10 * time.Second

// errUnreachable marks a Kafka that did not answer checkTopic.
var errUnreachable = errors.New("cannot reach Kafka")

// checkTopic asks the brokers for topic's metadata once, before anything is
// produced to it, so that a broker that is down fails the command at once
// (a produce would retry until --timeout and say only "context deadline
// exceeded"), and a topic that does not exist is an error naming it (a
// not-found one, exit 3), never created.
func (o *opts) checkTopic(ctx context.Context, cl *kgo.Client, flag, topic string) error {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(pctx, topic)
	if err != nil {
		if pctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s: %w", probeTimeout, err)
		}
		return fmt.Errorf("%w at %s (--brokers/KJOB_BROKERS): %w; check that the brokers are running and reachable from here, "+
			"and that the address and the TLS/SASL settings (KJOB_KAFKA_*) are the deployment's", errUnreachable, o.brokers, err)
	}
	td, ok := md.Topics[topic]
	switch {
	case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("topic %s does not exist on %s: %w; check %s (a typo?) against the deployment's (the producer and workers create it when they start); kjobctl never creates it",
			topic, o.brokers, operator.ErrNoTopic, flag)
	case td.Err != nil:
		return fmt.Errorf("topic %s on %s: %w", topic, o.brokers, td.Err)
	}
	return nil
}

// signHook signs every window record kjobctl creates (trigger, backfill,
// resume --catchup) as it is buffered, so workers that require signatures
// accept them. It cannot fail for them: they all carry their topic.
type signHook func(*kgo.Record) error

// OnProduceRecordBuffered implements kgo.HookProduceRecordBuffered.
func (h signHook) OnProduceRecordBuffered(r *kgo.Record) { _ = h(r) }

const triggerUsage = `kjobctl trigger: publish one manual window of JOB now (trigger=manual) and
print its id. The window is [now, the job's next fire time). It runs even if
the job is paused or disabled (a warning on stderr says so).

Usage: kjobctl trigger JOB [--payload JSON] [flags]`

func triggerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opts
	var payload string
	f := cli.NewFlags("kjobctl trigger", triggerUsage)
	f.SetOutput(stdout)
	o.register(f)
	f.String(&payload, "payload", "", "", "JSON object replacing the job's payload for this window")
	pos, err := f.ParseInterspersed(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("trigger: want exactly one JOB argument, got %d: %w", len(pos), errUsage)
	}
	var p json.RawMessage
	if payload != "" {
		b := bytes.TrimSpace([]byte(payload))
		if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
			return fmt.Errorf(`trigger: --payload %q: want a JSON object such as {"url":"http://127.0.0.1:8080/hook"}: %w`, payload, errUsage)
		}
		if why := schedule.PayloadTooLarge(len(b)); why != "" {
			return fmt.Errorf("trigger: --payload %s (the schedules file's limit): %w", why, errUsage)
		}
		p = json.RawMessage(b)
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	j, err := o.job(ctx, "trigger", pos[0], stderr)
	if err != nil {
		return err
	}
	cctx, cancel := o.ctx(ctx)
	defer cancel()
	op, err := o.operator(nil, nil)
	if err != nil {
		return err
	}
	// A manual window runs whatever the job's state; say so when the
	// schedule would not run it.
	if !j.Enabled {
		fmt.Fprintf(stderr, "kjobctl: warning: job %s is disabled in %s; this manual window runs anyway\n", j.Name, o.jobs.Where())
	}
	switch p, err := op.Paused(cctx, j.Name); {
	case err != nil:
		fmt.Fprintf(stderr, "kjobctl: warning: cannot tell whether job %s is paused: %s\n", j.Name, safe(err.Error()))
	case p != nil:
		fmt.Fprintf(stderr, "kjobctl: warning: job %s is paused (since %s by %s: %s); this manual window runs anyway\n", j.Name, fmtTime(p.At), safe(p.By), safe(p.Note))
	}
	cl, err := o.publisher()
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := o.checkTopic(cctx, cl, "--topic/KJOB_TOPIC", o.topic); err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	if op, err = o.operator(cl, nil); err != nil {
		return err
	}
	m, rec, err := op.Trigger(cctx, j.Name, p)
	if err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	if o.output == "json" {
		return writeJSON(stdout, map[string]any{"id": m.ID, "job": m.Job, "partition": rec.Partition, "offset": rec.Offset, "window": m.Window})
	}
	fmt.Fprintln(stdout, m.ID)
	return nil
}

const backfillUsage = `kjobctl backfill: publish JOB's windows whose start lies in [--from, --to) as
records with trigger=backfill while everything runs. Their ids are
deterministic ("<job>@<start>#backfill"). A second backfill of the same
range publishes nothing new unless --rerun: windows the workers have run
(or are running) are left out, and so are windows published before but not
yet run, which kjobctl remembers in Redis for --retention (the workers'
dedupe retention). --rerun clears the windows' records and publishes them
all again.

--to in the future is refused unless --allow-future: such windows would run
now and again at their scheduled time, under their scheduled ids.

--catchup publishes under the scheduled ids ("<job>@<start>") with
trigger=catchup instead, as "kjobctl resume --catchup" does: use it to
finish a catch-up that stopped partway.

Dry run unless --execute. Above 50 windows a progress bar with rate and
ETA is drawn on stderr when it is a terminal (--progress always|never
overrides that).

Usage: kjobctl backfill JOB --from T1 --to T2 [--rerun] [--catchup] [--allow-future] [--execute] [flags]`

// maxBackfill bounds one backfill (and, by default, one catch-up).
const maxBackfill = operator.MaxBackfill

// maxListed is how many window ids the table output lists.
const maxListed = 20

// backfillResult is what backfill and resume --catchup print.
type backfillResult = operator.BackfillResult

func backfillCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opts
	var from, to, progress string
	var rerun, execute, allowFuture, catchup bool
	f := cli.NewFlags("kjobctl backfill", backfillUsage)
	f.SetOutput(stdout)
	o.register(f)
	o.registerRetention(f)
	f.String(&from, "from", "", "", "first window start to include (RFC 3339)")
	f.String(&to, "to", "", "", "window starts before this time are included (RFC 3339)")
	f.Bool(&rerun, "rerun", "", false, "publish and run again windows that were published or run before")
	f.Bool(&allowFuture, "allow-future", "", false, "allow --to in the future (those windows then run now and again when they fall due)")
	f.Bool(&catchup, "catchup", "", false, "publish under the scheduled ids with trigger=catchup, as resume --catchup does")
	f.Bool(&execute, "execute", "", false, "publish (without it: dry run)")
	f.String(&progress, "progress", "", "auto", "progress bar on stderr for 50 windows or more: auto (when stderr is a terminal), always or never")
	pos, err := f.ParseInterspersed(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("backfill: want exactly one JOB argument, got %d: %w", len(pos), errUsage)
	}
	if from == "" || to == "" {
		return fmt.Errorf("backfill: --from and --to are required (RFC 3339 times): %w", errUsage)
	}
	if progress != "auto" && progress != "always" && progress != "never" {
		return fmt.Errorf("backfill: --progress %q: want auto, always or never: %w", progress, errUsage)
	}
	t1, err := parseTime("backfill: --from", from)
	if err != nil {
		return err
	}
	t2, err := parseTime("backfill: --to", to)
	if err != nil {
		return err
	}
	if !t2.After(t1) {
		return fmt.Errorf("backfill: --to %s is not after --from %s: %w", fmtTime(t2), fmtTime(t1), errUsage)
	}
	if now := nowFunc(); t2.After(now) && !allowFuture {
		return fmt.Errorf("backfill: --to %s is in the future (now %s): windows that have not fallen due would run now and again at their scheduled time; "+
			"use --to %s, or --allow-future: %w", fmtTime(t2), fmtTime(now), fmtTime(now), errUsage)
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	j, err := o.job(ctx, "backfill", pos[0], stderr)
	if err != nil {
		return err
	}
	starts := j.Windows(t1.Add(-time.Nanosecond), t2.Add(-time.Nanosecond), maxBackfill+1)
	if len(starts) > maxBackfill {
		return fmt.Errorf("backfill: %s has more than %d windows in [%s, %s); backfill a shorter range: %w", j.Name, maxBackfill, fmtTime(t1), fmtTime(t2), errUsage)
	}
	cctx, cancel := o.ctx(ctx)
	defer cancel()
	cl, err := o.publisherFor(cctx, execute)
	if err != nil {
		return fmt.Errorf("backfill: %w", err)
	}
	if cl != nil {
		defer cl.Close()
	}
	op, err := o.operator(cl, nil)
	if err != nil {
		return err
	}
	spec := operator.BackfillSpec{Job: j.Name, From: t1, To: t2, Rerun: rerun, Catchup: catchup, AllowFuture: true,
		Hold: o.timeout + time.Minute, NewProgress: progressFor(progress, stderr)}
	backfill := op.PlanBackfill
	if execute {
		backfill = op.Backfill
	}
	res, err := backfill(cctx, spec)
	if err != nil {
		return fmt.Errorf("backfill: %w", err)
	}
	if err := renderBackfill(stdout, o.output, res); err != nil {
		return err
	}
	if !execute {
		return fmt.Errorf("backfill: %w", errDryRun)
	}
	return nil
}

// publisherFor is, to execute, the publisher once it checked the windows
// topic (so a broker that is down or a topic that does not exist fails
// before anything changes); nil for a dry run.
func (o *opts) publisherFor(ctx context.Context, execute bool) (*kgo.Client, error) {
	if !execute {
		return nil, nil
	}
	cl, err := o.publisher()
	if err != nil {
		return nil, err
	}
	if err := o.checkTopic(ctx, cl, "--topic/KJOB_TOPIC", o.topic); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// progressFor draws a progress bar on stderr for 50 windows or more, as
// progress (auto, always or never) says.
func progressFor(progress string, stderr io.Writer) func(total int) operator.Progress {
	return func(total int) operator.Progress {
		if total >= 50 && (progress == "always" || progress == "auto" && isTerminal(stderr)) {
			return newProgressBar(stderr, total)
		}
		return nil
	}
}

func renderBackfill(w io.Writer, output string, r *backfillResult) error {
	if output == "json" {
		return writeJSON(w, r)
	}
	verb := "would publish"
	if r.Executed {
		verb = "published"
	}
	what := "Backfill"
	if r.Trigger == string(jobmsg.TriggerCatchup) {
		what = "Catch-up"
	}
	fmt.Fprintf(w, "%s %s [%s, %s): %d windows; %s %d; left out: %d already run or running, %d published before but not yet run (--rerun publishes them again)\n",
		what, r.Job, r.From, r.To, r.Windows, verb, len(r.Published), len(r.Skipped), len(r.PublishedBefore))
	return listIDs(w, r.Published)
}

// listIDs prints up to maxListed ids, indented, and how many more.
func listIDs(w io.Writer, ids []string) error {
	for i, id := range ids {
		if i == maxListed {
			_, err := fmt.Fprintf(w, "  ... and %d more (-o json lists them all)\n", len(ids)-maxListed)
			return err
		}
		if _, err := fmt.Fprintf(w, "  %s\n", safe(id)); err != nil {
			return err
		}
	}
	return nil
}

// progressBar draws "[#####-----] n/total  rate/s  ETA" on one line.
type progressBar struct {
	w     io.Writer
	total int
	start time.Time
	mu    sync.Mutex
	last  time.Time
	shown int
}

func newProgressBar(w io.Writer, total int) *progressBar {
	return &progressBar{w: w, total: total, start: time.Now()}
}

// Set draws n of the total.
func (b *progressBar) Set(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if n < b.total && now.Sub(b.last) < 100*time.Millisecond {
		return
	}
	b.last, b.shown = now, n
	const width = 30
	filled := width * n / b.total
	el := now.Sub(b.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(n) / el
	}
	eta := "-"
	if rate > 0 {
		eta = time.Duration(float64(b.total-n) / rate * float64(time.Second)).Round(time.Second).String()
	}
	bar := make([]byte, width)
	for i := range bar {
		if i < filled {
			bar[i] = '#'
		} else {
			bar[i] = '-'
		}
	}
	fmt.Fprintf(b.w, "\r[%s] %d/%d windows  %.0f/s  ETA %s ", bar, n, b.total, rate, eta)
}

// Finish draws the full bar and ends its line.
func (b *progressBar) Finish() {
	b.mu.Lock()
	shown := b.shown
	b.mu.Unlock()
	if shown < b.total {
		b.Set(b.total)
	}
	fmt.Fprintln(b.w)
}
