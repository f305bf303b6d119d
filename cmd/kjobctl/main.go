// Command kjobctl operates kjob: it shows and steers a running deployment
// (status, lag, history, replay, backfill, trigger, pause, resume, dead letters), serves
// a live dashboard, runs
// the embedded development broker and the demo, and checks schedules files.
//
//	kjobctl status
//	kjobctl replay --group kjob-workers --by-duration 1h --rerun --execute
//	kjobctl schedule check schedules.yaml
//
// Exit codes: 0 success; 1 error (Kafka, Redis, workers not answering; a
// status with a part it could not read; an invalid schedules file, also
// for schedule check); 2 usage (unknown command, bad flag or value, a
// --job and --partition that disagree); 3 not found (unknown job, group,
// partition or dead letter); 4 dry run: the plan was printed and nothing
// changed (add --execute); 5 refused by the current state (job already
// paused or not paused, group rebalancing, dead letters left out of a
// redrive).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/redis/go-redis/v9"
)

const usage = `kjobctl: operate kjob.

Usage:
  kjobctl status                    producer leader, workers and partitions, jobs with next and last windows
  kjobctl lag [--watch]             per partition: committed offset, end offset, lag, owner, time lag
  kjobctl history JOB               the job's past runs: outcome, duration, attempt, token, worker, error
  kjobctl replay --group G MODE     reset the workers' offsets while they run (dry run unless --execute)
  kjobctl backfill JOB --from T1 --to T2   publish past windows (trigger=backfill; dry run unless --execute)
  kjobctl trigger JOB [--payload J] publish one manual window now and print its id
  kjobctl pause JOB                 stop publishing JOB's windows
  kjobctl resume JOB [--catchup]    publish them again (--catchup: also the ones skipped while paused; dry run unless --execute)
  kjobctl dlq list|show ID|redrive  inspect and republish dead letters (redrive: dry run unless --execute)
  kjobctl schedule check FILE       validate a schedules file and print each job's next fire times
  kjobctl dashboard [--listen A]    serve a live, read-only page: leader, workers, lag chart, jobs, recent windows
  kjobctl dev-broker [flags]        run the embedded Kafka-compatible broker (kfake) for development
  kjobctl demo [flags]              run a broker, Redis, 2 producers and 3 workers on this machine

Every operations command reads the deployment's KJOB_* environment (brokers,
Redis, namespace, topic, group, schedules) like the producer and worker do,
and prints a table, or JSON with -o json.

Exit codes: 0 ok; 1 error (Kafka, Redis, workers not answering, a status part
unknown, an invalid schedules file - also for schedule check); 2 usage; 3 not
found (job, group, partition, dead letter); 4 dry run, nothing changed (add
--execute); 5 refused by the current state (already paused, not paused, group
rebalancing, chosen dead letters left out of a redrive).

Run "kjobctl COMMAND --help" for a command's flags.`

func main() {
	// go-redis logs every failed dial itself; kjobctl reports each failure
	// once, as the error of the part that needed Redis.
	redis.SetLogger(silentRedis{})
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// exitNotFound: an unknown job, group, partition or dead letter.
	exitNotFound = 3
	// exitDryRun: a destructive command ran without --execute.
	exitDryRun = 4
	// exitConflict: refused by the current state.
	exitConflict = 5
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	var err error
	switch args[0] {
	case "dev-broker":
		err = devBroker(ctx, args[1:], stderr)
	case "demo":
		err = demo(ctx, args[1:], stdout, stderr)
	case "schedule":
		err = scheduleCmd(args[1:], stdout, stderr)
	case "status":
		err = statusCmd(ctx, args[1:], stdout, stderr)
	case "lag":
		err = lagCmd(ctx, args[1:], stdout, stderr)
	case "history":
		err = historyCmd(ctx, args[1:], stdout, stderr)
	case "replay":
		err = replayCmd(ctx, args[1:], stdout, stderr)
	case "backfill":
		err = backfillCmd(ctx, args[1:], stdout, stderr)
	case "trigger":
		err = triggerCmd(ctx, args[1:], stdout, stderr)
	case "pause":
		err = pauseCmd(ctx, args[1:], stdout, stderr)
	case "resume":
		err = resumeCmd(ctx, args[1:], stdout, stderr)
	case "dlq":
		err = dlqCmd(ctx, args[1:], stdout, stderr)
	case "dashboard":
		err = dashboardCmd(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "kjobctl: unknown command %q\n\n%s\n", args[0], usage)
		return exitUsage
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "kjobctl:", err)
		return exitUsage
	case errors.Is(err, errNotFound):
		fmt.Fprintln(stderr, "kjobctl:", err)
		return exitNotFound
	case errors.Is(err, errDryRun):
		fmt.Fprintln(stderr, "kjobctl:", err)
		return exitDryRun
	case errors.Is(err, errConflict):
		fmt.Fprintln(stderr, "kjobctl:", err)
		return exitConflict
	default:
		fmt.Fprintln(stderr, "kjobctl:", err)
		return exitError
	}
}

var errUsage = errors.New("usage")
