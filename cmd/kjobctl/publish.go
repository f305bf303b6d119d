package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/cli"
	"github.com/kjob/kjob/pkg/dedupe"
	"github.com/kjob/kjob/pkg/jobmsg"
	"github.com/kjob/kjob/pkg/schedule"
)

// publisher produces window records partitioned as the producer does
// (murmur2 of the job name), so a job's windows stay on one partition.
func (o *opts) publisher() (*kgo.Client, error) { return o.producerClient(o.sign) }

// redriver is the client that republishes dead letters: unlike publisher
// it never signs. A redriven record keeps the headers it had, so one that
// was signed stays validly signed, and one dead-lettered for a missing or
// bad signature is not laundered by an operator's key.
func (o *opts) redriver() (*kgo.Client, error) { return o.producerClient(nil) }

func (o *opts) producerClient(sign func(*kgo.Record) error) (*kgo.Client, error) {
	opts := append(o.kgoOpts(),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.AllowAutoTopicCreation(),
	)
	if sign != nil {
		opts = append(opts, kgo.WithHooks(signHook(sign)))
	}
	return kgo.NewClient(opts...)
}

// signHook signs every window record kjobctl creates (trigger, backfill,
// resume --catchup) as it is buffered, so workers that require signatures
// accept them. It cannot fail for them: they all carry their topic.
type signHook func(*kgo.Record) error

// OnProduceRecordBuffered implements kgo.HookProduceRecordBuffered.
func (h signHook) OnProduceRecordBuffered(r *kgo.Record) { _ = h(r) }

// message builds a window of job j starting at start.
func message(j *schedule.Job, id string, start time.Time, trigger jobmsg.Trigger, payload json.RawMessage, now time.Time) *jobmsg.Message {
	end := j.Next(start)
	if end.IsZero() {
		end = start.Add(time.Second)
	}
	if payload == nil {
		payload = j.Payload
	}
	return &jobmsg.Message{
		ID: id, Job: j.Name, Handler: j.Handler,
		Window:      jobmsg.Window{Start: start.UTC(), End: end.UTC()},
		ScheduledAt: start.UTC(), PublishedAt: now.UTC(), Trigger: trigger, Payload: payload,
		Policy: jobmsg.Policy{
			Timeout: jobmsg.Duration(j.Timeout), MaxAttempts: j.Retries.MaxAttempts,
			Backoff: jobmsg.Duration(j.Retries.Backoff), MaxBackoff: jobmsg.Duration(j.Retries.MaxBackoff),
		},
	}
}

const triggerUsage = `kjobctl trigger: publish one manual window of JOB now (trigger=manual) and
print its id. The window is [now, the job's next fire time).

Usage: kjobctl trigger JOB [--payload JSON] [flags]`

func triggerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opts
	var payload string
	f := cli.NewFlags("trigger", triggerUsage)
	f.SetOutput(stderr)
	o.register(f)
	o.needSchedules = true
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
		p = json.RawMessage(b)
	}
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	j, err := o.job("trigger", pos[0])
	if err != nil {
		return err
	}
	now := nowFunc()
	nonce := make([]byte, 4)
	_, _ = rand.Read(nonce)
	m := message(j, jobmsg.ManualID(j.Name, now, hex.EncodeToString(nonce)), now, jobmsg.TriggerManual, p, now)
	rec, err := jobmsg.Record(o.topic, m)
	if err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	cl, err := o.publisher()
	if err != nil {
		return err
	}
	defer cl.Close()
	cctx, cancel := o.ctx(ctx)
	defer cancel()
	if err := cl.ProduceSync(cctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("trigger: publish to %s: %w", o.topic, err)
	}
	if o.output == "json" {
		return writeJSON(stdout, map[string]any{"id": m.ID, "job": m.Job, "partition": rec.Partition, "offset": rec.Offset, "window": m.Window})
	}
	fmt.Fprintln(stdout, m.ID)
	return nil
}

const backfillUsage = `kjobctl backfill: publish JOB's windows whose start lies in [--from, --to) as
records with trigger=backfill while everything runs. Their ids are
deterministic ("<job>@<start>#backfill"), so a second backfill of the same
range publishes nothing new (windows the workers have seen are left out)
unless --rerun, which clears their done markers and publishes them again.
Dry run unless --execute.

Usage: kjobctl backfill JOB --from T1 --to T2 [--rerun] [--execute] [flags]`

// maxBackfill bounds one backfill.
const maxBackfill = 100_000

type backfillResult struct {
	Job       string   `json:"job"`
	From      string   `json:"from"`
	To        string   `json:"to"`
	Windows   int      `json:"windows"`
	Published []string `json:"published"`
	Skipped   []string `json:"skipped"`
	Executed  bool     `json:"executed"`
}

func backfillCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opts
	var from, to string
	var rerun, execute, progress bool
	f := cli.NewFlags("backfill", backfillUsage)
	f.SetOutput(stderr)
	o.register(f)
	o.needSchedules = true
	f.String(&from, "from", "", "", "first window start to include (RFC 3339)")
	f.String(&to, "to", "", "", "window starts before this time are included (RFC 3339)")
	f.Bool(&rerun, "rerun", "", false, "run windows again that a previous backfill already ran")
	f.Bool(&execute, "execute", "", false, "publish (without it: dry run)")
	f.Bool(&progress, "progress", "", true, "show a progress bar on stderr when publishing 50 windows or more")
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
	if err := o.setup(); err != nil {
		return err
	}
	defer o.close()
	j, err := o.job("backfill", pos[0])
	if err != nil {
		return err
	}
	starts := j.Windows(t1.Add(-time.Nanosecond), t2.Add(-time.Nanosecond), maxBackfill+1)
	if len(starts) > maxBackfill {
		return fmt.Errorf("backfill: %s has more than %d windows in [%s, %s); backfill a shorter range: %w", j.Name, maxBackfill, fmtTime(t1), fmtTime(t2), errUsage)
	}
	store, err := o.store()
	if err != nil {
		return err
	}
	cctx, cancel := o.ctx(ctx)
	defer cancel()
	res := backfillResult{Job: j.Name, From: fmtTime(t1), To: fmtTime(t2), Windows: len(starts), Published: []string{}, Skipped: []string{}, Executed: execute}
	var todo []time.Time
	for _, s := range starts {
		id := jobmsg.BackfillID(j.Name, s)
		if !rerun {
			_, err := store.State(cctx, id)
			switch {
			case err == nil:
				res.Skipped = append(res.Skipped, id)
				continue
			case !errors.Is(err, dedupe.ErrNotFound):
				return fmt.Errorf("backfill: %w", err)
			}
		}
		todo = append(todo, s)
	}
	if !execute {
		for _, s := range todo {
			res.Published = append(res.Published, jobmsg.BackfillID(j.Name, s))
		}
		if err := renderBackfill(stdout, o.output, &res); err != nil {
			return err
		}
		return fmt.Errorf("backfill: %w", errDryRun)
	}
	cl, err := o.publisher()
	if err != nil {
		return err
	}
	defer cl.Close()
	var bar *progressBar
	if progress && len(todo) >= 50 {
		bar = newProgressBar(stderr, len(todo))
	}
	now := nowFunc()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		done     atomic.Int64
	)
	for _, s := range todo {
		id := jobmsg.BackfillID(j.Name, s)
		if rerun {
			if err := store.Forget(cctx, id); err != nil {
				return fmt.Errorf("backfill: %w", err)
			}
		}
		rec, err := jobmsg.Record(o.topic, message(j, id, s, jobmsg.TriggerBackfill, nil, now))
		if err != nil {
			return fmt.Errorf("backfill: %w", err)
		}
		wg.Add(1)
		cl.Produce(cctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err == nil {
				res.Published = append(res.Published, id)
			}
			mu.Unlock()
			if n := done.Add(1); bar != nil {
				bar.set(int(n))
			}
		})
	}
	wg.Wait()
	if bar != nil {
		bar.finish()
	}
	if firstErr != nil {
		return fmt.Errorf("backfill: published %d of %d windows, then: %w (run it again: published windows are left out)", len(res.Published), len(todo), firstErr)
	}
	return renderBackfill(stdout, o.output, &res)
}

func renderBackfill(w io.Writer, output string, r *backfillResult) error {
	if output == "json" {
		return writeJSON(w, r)
	}
	verb := "would publish"
	if r.Executed {
		verb = "published"
	}
	fmt.Fprintf(w, "Backfill %s [%s, %s): %d windows; %s %d, %d already backfilled (left out; --rerun runs them again)\n",
		r.Job, r.From, r.To, r.Windows, verb, len(r.Published), len(r.Skipped))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	const maxRows = 20
	for i, id := range r.Published {
		if i == maxRows {
			fmt.Fprintf(tw, "  ... and %d more\n", len(r.Published)-maxRows)
			break
		}
		fmt.Fprintf(tw, "  %s\n", id)
	}
	return tw.Flush()
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

func (b *progressBar) set(n int) {
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

func (b *progressBar) finish() {
	b.mu.Lock()
	shown := b.shown
	b.mu.Unlock()
	if shown < b.total {
		b.set(b.total)
	}
	fmt.Fprintln(b.w)
}
