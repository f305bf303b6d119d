// Command kjobdev runs kjob on a developer's machine: the demo (make demo
// runs "kjobdev demo") and the embedded Kafka-compatible broker the demo,
// the end-to-end tests and local development use. It is not an operator's
// tool (that is kjobctl) and has no production use.
//
//	kjobdev demo [flags]     a broker, Redis, 2 producers and 3 workers on this machine
//	kjobdev broker [flags]   the embedded broker (kfake) as a process
//
// Exit codes: 0 ok, 1 error, 2 usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/base/buildinfo"
)

const usage = `kjobdev: run kjob on this machine, for development.

Usage:
  kjobdev demo [flags]     run a broker, Redis, 2 producers and 3 workers on this machine (make demo)
  kjobdev broker [flags]   run the embedded Kafka-compatible broker (kfake) for development

Exit codes: 0 ok, 1 error, 2 usage.

Run "kjobdev COMMAND --help" for a command's flags, "kjobdev --version" for
the version. Operate what runs with kjobctl.`

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

var errUsage = errors.New("usage")

// commands are kjobdev's commands, by name.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"demo":   demo,
	"broker": broker,
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		fmt.Fprintln(stdout, usage)
		return exitOK
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, "kjobdev", buildinfo.Version())
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kjobdev: unknown command %q; run \"kjobdev --help\" for the commands\n", args[0])
		return exitUsage
	}
	err := cmd(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage) || errors.Is(err, cli.ErrUsage):
		fmt.Fprintln(stderr, "kjobdev:", err)
		return exitUsage
	default:
		fmt.Fprintln(stderr, "kjobdev:", err)
		return exitError
	}
}
