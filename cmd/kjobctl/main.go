// Command kjobctl operates kjob: it runs the embedded development broker and
// the demo, and checks schedules files.
//
//	kjobctl dev-broker --listen 127.0.0.1:9092 --data-dir ./data
//	kjobctl demo
//	kjobctl schedule check schedules.yaml
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `kjobctl: operate kjob.

Usage:
  kjobctl dev-broker [flags]        run the embedded Kafka-compatible broker (kfake) for development
  kjobctl demo [flags]              run a broker, Redis, 2 producers and 3 workers on this machine
  kjobctl schedule check FILE       validate a schedules file and print each job's next fire times

Run "kjobctl COMMAND --help" for a command's flags.`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
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
	default:
		fmt.Fprintln(stderr, "kjobctl:", err)
		return exitError
	}
}

var errUsage = errors.New("usage")
