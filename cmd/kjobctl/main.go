// Command kjobctl operates kjob: it shows and steers a running deployment
// (status, lag, history, replay, backfill, trigger, pause, resume, dead letters), serves
// a live dashboard and checks schedules files. Its actions are
// internal/ops/operator's, the same the dashboard calls; kjobctl parses flags
// and renders. The demo and the development broker are cmd/kjobdev's.
//
//	kjobctl status
//	kjobctl replay --group kjob-workers --by-duration 1h --rerun --execute
//	kjobctl schedule check schedules.yaml
//
// Exit codes (the table exitCodes, which "kjobctl --help" prints, is the one
// place they are decided): 0 ok, 1 error, 2 usage, 3 not found, 4 dry run,
// 5 refused by the current state, 6 (status) no worker running.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/base/buildinfo"
	"github.com/kjob/kjob/internal/ops/inspect"
	"github.com/kjob/kjob/internal/ops/operator"
)

const usage = `kjobctl: operate kjob.

Usage:
  kjobctl status                    producer leader, workers and partitions, jobs with next and last windows
  kjobctl lag [--watch]             per partition: committed offset, end offset, lag, owner, time lag
  kjobctl history JOB               the job's past runs: outcome, duration, attempt, token, worker, error
  kjobctl replay --group G MODE     reset the workers' offsets while they run (dry run unless --execute)
  kjobctl backfill JOB --from T1 --to T2   publish past windows (trigger=backfill; dry run unless --execute)
  kjobctl trigger JOB [--payload J] publish one manual window now and print its id
  kjobctl pause JOB --note N        stop publishing JOB's windows (a spec change, in the change log)
  kjobctl resume JOB [--catchup]    publish them again (--catchup: also the ones skipped while paused; dry run unless --execute)
  kjobctl dlq list|show ID|redrive  inspect and republish dead letters (redrive: dry run unless --execute)
  kjobctl schedule check FILE       validate a schedules file and print each job's next fire times
  kjobctl schedule apply -f FILE    plan, then (--execute) apply a schedules file to the schedules topic
  kjobctl schedule list|get|history|delete|revert|pause|resume   the schedules topic's jobs, versioned and audited
  kjobctl dashboard [--listen A]    serve a live page: time lag, leader, workers, jobs, recent windows (read-only unless --actions)

Every operations command reads the deployment's KJOB_* environment (brokers,
Redis, namespace, topic, group, schedules) like the producer and worker do,
and prints a table, or JSON with -o json.

Exit codes:
%s

Run "kjobctl COMMAND --help" (or "kjobctl help COMMAND") for a command's
flags, "kjobctl --version" for the version.`

func main() {
	// go-redis logs every failed dial itself; kjobctl reports each failure
	// once, as the error of the part that needed Redis.
	redis.SetLogger(silentRedis{})
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// commands are kjobctl's commands, by name.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"schedule":  scheduleCmd,
	"status":    statusCmd,
	"lag":       lagCmd,
	"history":   historyCmd,
	"replay":    replayCmd,
	"backfill":  backfillCmd,
	"trigger":   triggerCmd,
	"pause":     pauseCmd,
	"resume":    resumeCmd,
	"dlq":       dlqCmd,
	"dashboard": dashboardCmd,
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, topUsage())
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "-help":
		fmt.Fprintln(stdout, topUsage())
		return exitOK
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, "kjobctl", buildinfo.Version())
		return exitOK
	case "help":
		if len(args) == 1 {
			fmt.Fprintln(stdout, topUsage())
			return exitOK
		}
		if _, ok := commands[args[1]]; !ok {
			return exit(stderr, fmt.Errorf("help: unknown command %q; run \"kjobctl --help\" for the commands: %w", args[1], errUsage))
		}
		// "kjobctl help dlq list" is "kjobctl dlq list --help".
		args = append(args[1:len(args):len(args)], "--help")
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return exit(stderr, fmt.Errorf("unknown command %q; run \"kjobctl --help\" for the commands: %w", args[0], errUsage))
	}
	return exit(stderr, cmd(ctx, args[1:], stdout, stderr))
}

// exitRule is one row of exitCodes.
type exitRule struct {
	code    int
	meaning string
	// is reports whether err gets this code; the first match wins.
	is func(err error) bool
}

// exitCodes is kjobctl's one table of exit codes: every command's error is
// mapped to its code here (exitCode), and --help prints it.
var exitCodes = []exitRule{
	{exitOK, "ok", func(err error) bool { return err == nil || errors.Is(err, flag.ErrHelp) }},
	{exitUsage, "usage: unknown command, flag or argument, a value that does not parse or is out of range (flag or KJOB_* variable), --job and --partition that disagree",
		func(err error) bool { return errors.Is(err, errUsage) || errors.Is(err, cli.ErrUsage) }},
	{exitNotFound, "not found: job, group, topic, partition, dead letter or schedule version",
		func(err error) bool {
			return errors.Is(err, errNotFound) || errors.Is(err, kerr.UnknownTopicOrPartition) ||
				errors.Is(err, operator.ErrNoTopic) || errors.Is(err, inspect.ErrNoTopic)
		}},
	{exitDryRun, "dry run: the plan was printed and nothing changed (add --execute)", func(err error) bool { return errors.Is(err, errDryRun) }},
	{exitConflict, "refused by the current state: already paused, not paused, group rebalancing, chosen dead letters left out of a redrive, a schedule version conflict",
		func(err error) bool { return errors.Is(err, errConflict) }},
	{exitNoWorker, "status only: no worker is running (the workers' group has no member), so no window runs",
		func(err error) bool { return errors.Is(err, errNoWorker) }},
	{exitError, "error: Kafka, Redis or the workers not answering, a status part that could not be read, an invalid schedules file (also for schedule check)",
		func(error) bool { return true }},
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// exitNotFound: an unknown job, group, topic, partition or dead letter.
	exitNotFound = 3
	// exitDryRun: a destructive command ran without --execute.
	exitDryRun = 4
	// exitConflict: refused by the current state.
	exitConflict = 5
	// exitNoWorker: status read everything, and no worker is running.
	exitNoWorker = 6
)

// exitCode is err's exit code, from exitCodes.
func exitCode(err error) int {
	for _, c := range exitCodes {
		if c.is(err) {
			return c.code
		}
	}
	return exitError
}

// exit prints err (made safe: it may quote a record) and returns its code.
// A windows topic the read side did not find is named by its flag.
func exit(stderr io.Writer, err error) int {
	if errors.Is(err, inspect.ErrNoTopic) {
		err = fmt.Errorf("%w; check --topic", err)
	}
	code := exitCode(err)
	if code != exitOK {
		fmt.Fprintln(stderr, "kjobctl:", safeLines(err.Error()))
	}
	return code
}

// topUsage is the usage with the exit codes table.
func topUsage() string {
	codes := slices.Clone(exitCodes)
	slices.SortFunc(codes, func(a, b exitRule) int { return a.code - b.code })
	var b strings.Builder
	for _, c := range codes {
		fmt.Fprintf(&b, "  %d  %s\n", c.code, c.meaning)
	}
	return fmt.Sprintf(usage, strings.TrimSuffix(b.String(), "\n"))
}

var errUsage = errors.New("usage")
