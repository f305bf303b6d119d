package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/testkit/testenv"
)

// subcommands are every kjobctl command line that takes flags, with a
// duration or integer flag it has (for a value that does not parse) and
// whether it refuses positional arguments.
var subcommands = []struct {
	args      []string
	badValue  string // a flag of it that takes a number or duration
	noArgs    bool   // a stray word is a usage error
	usageWord string // a word of its --help text
}{
	{[]string{"status"}, "--timeout", true, "kjobctl status"},
	{[]string{"lag"}, "--interval", true, "kjobctl lag"},
	{[]string{"history"}, "--limit", false, "kjobctl history"},
	{[]string{"replay"}, "--ack-timeout", true, "kjobctl replay"},
	{[]string{"backfill"}, "--timeout", false, "kjobctl backfill"},
	{[]string{"trigger"}, "--timeout", false, "kjobctl trigger"},
	{[]string{"pause"}, "--timeout", false, "kjobctl pause"},
	{[]string{"resume"}, "--max-windows", false, "kjobctl resume"},
	{[]string{"dlq", "list"}, "--timeout", false, "kjobctl dlq"},
	{[]string{"dlq", "show"}, "--timeout", false, "kjobctl dlq"},
	{[]string{"dlq", "redrive"}, "--timeout", false, "kjobctl dlq"},
	{[]string{"schedule", "check"}, "--next", false, "kjobctl schedule check"},
	{[]string{"dashboard"}, "--recent", true, "kjobctl dashboard"},
}

// Every subcommand answers a bad flag and a value that does not parse with
// exit 2 and one line naming it with a hint to --help (not the whole
// usage), and --help with its usage and exit 0. Before, both exited 1 and
// dumped the usage.
func TestExitCodesOfEverySubcommand(t *testing.T) {
	t.Setenv("KJOB_BROKERS", "127.0.0.1:1") // nothing may get far enough to dial
	t.Setenv("KJOB_REDIS_URL", "redis://127.0.0.1:1")
	for _, sc := range subcommands {
		name := strings.Join(sc.args, " ")
		args := func(extra ...string) []string { return append(append([]string{}, sc.args...), extra...) }

		code, out, stderr := runCmd(t, args("--no-such-flag")...)
		hint := `(run "kjobctl ` + name + ` --help" for the flags)`
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "unknown flag --no-such-flag") || !strings.Contains(stderr, hint) || out != "" {
			t.Errorf("%s --no-such-flag: exit %d, stdout %q, stderr %q; want exit 2 and one line with %s", name, code, out, stderr, hint)
		}

		code, _, stderr = runCmd(t, args(sc.badValue, "abc")...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, sc.badValue+` "abc"`) || !strings.Contains(stderr, "want ") {
			t.Errorf("%s %s abc: exit %d, stderr %q; want exit 2 and one line naming the flag, the value and the form", name, sc.badValue, code, stderr)
		}

		code, out, stderr = runCmd(t, args("--help")...)
		if code != exitOK || !strings.Contains(out, sc.usageWord) || !strings.Contains(out, "Flags") || stderr != "" {
			t.Errorf("%s --help: exit %d, stderr %q, stdout:\n%s", name, code, stderr, out)
		}
		if strings.Contains(out, `(default "`+"30s") || strings.Contains(out, `(default "3")`) {
			t.Errorf("%s --help quotes a number or duration default:\n%s", name, out)
		}

		if sc.noArgs {
			code, _, stderr = runCmd(t, args("stray")...)
			if code != exitUsage || !strings.Contains(stderr, `unexpected argument "stray"`) {
				t.Errorf("%s stray: exit %d, stderr %q; want exit 2 naming the stray word", name, code, stderr)
			}
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, exitOK, "Exit codes:\n  0  ok\n  1  error"},
		{[]string{"help"}, exitOK, "kjobctl: operate kjob."},
		{[]string{"help", "replay"}, exitOK, "kjobctl replay: move the workers' committed offsets"},
		{[]string{"help", "dlq", "list"}, exitOK, "kjobctl dlq: inspect dead letters"},
		{[]string{"schedule", "--help"}, exitOK, "kjobctl schedule check [flags] FILE"},
		{[]string{"dlq", "--help"}, exitOK, "kjobctl dlq list"},
		{[]string{"--version"}, exitOK, "kjobctl "},
		{[]string{"status", "--version"}, exitOK, "kjobctl status "},
	} {
		code, out, stderr := runCmd(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("kjobctl %s: exit %d (want %d), stderr %q, stdout:\n%s\nwant it to contain %q", strings.Join(tc.args, " "), code, tc.code, stderr, out, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"schedule"}, `want the subcommand "check"`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"; run "kjobctl --help" for the commands`},
	} {
		code, _, stderr := runCmd(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("kjobctl %s: exit %d, stderr %q; want exit 2 and one line with %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}

// An unknown topic exits 3, like an unknown group or job.
func TestUnknownTopicIsNotFound(t *testing.T) {
	brokers := testenv.Brokers(t)
	r := testenv.NewRedis(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "kjob.windows"); err != nil {
		t.Fatal(err)
	}
	schedules := filepath.Join(t.TempDir(), "schedules.yaml")
	if err := os.WriteFile(schedules, []byte("jobs:\n  - name: a\n    schedule: \"@every 1m\"\n    handler: log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KJOB_BROKERS", strings.Join(brokers, ","))
	t.Setenv("KJOB_REDIS_URL", r.URL())
	t.Setenv("KJOB_SCHEDULES", schedules)
	for _, args := range [][]string{
		{"lag", "--topic", "no-such-topic"},
		{"dlq", "list", "--topic", "no-such-topic"},
		{"dlq", "list", "--dlq-topic", "no-such-dlq"},
		{"replay", "--topic", "no-such-topic", "--to-earliest"},
		{"trigger", "a", "--topic", "no-such-topic", "--timeout", "10s"},
	} {
		code, _, stderr := runCmd(t, args...)
		if code != exitNotFound {
			t.Errorf("kjobctl %s: exit %d, stderr %q; want 3 (not found)", strings.Join(args, " "), code, stderr)
		}
	}
}

// A --to-datetime in the future would move the offsets to the log end and
// skip every window not yet run; it is refused unless --allow-future.
func TestReplayFutureDatetimeRefused(t *testing.T) {
	t.Setenv("KJOB_BROKERS", "127.0.0.1:1")
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	code, _, stderr := runCmd(t, "replay", "--to-datetime", future)
	if code != exitUsage || !strings.Contains(stderr, "replay: --to-datetime "+future+" is in the future") || !strings.Contains(stderr, "--allow-future") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming the time and --allow-future", code, stderr)
	}
	// With --allow-future it goes on (and here fails to reach Kafka).
	code, _, stderr = runCmd(t, "replay", "--to-datetime", future, "--allow-future", "--timeout", "1s", "--ack-timeout", "1s")
	if code == exitUsage {
		t.Errorf("--allow-future: exit %d, stderr %q", code, stderr)
	}
}

// A broker address that can never be dialled is a usage error, before
// anything is dialled.
func TestBadBrokersRefused(t *testing.T) {
	t.Setenv("KJOB_BROKERS", "nonsense:99999")
	code, _, stderr := runCmd(t, "lag")
	if code != exitUsage || !strings.Contains(stderr, `--brokers/KJOB_BROKERS=nonsense:99999: broker "nonsense:99999": port "99999" is not a number from 1 to 65535`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
