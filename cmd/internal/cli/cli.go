// Package cli holds what kjob's binaries share: flags that mirror
// environment variables, logging set-up, the Redis client and the HTTP
// endpoints for health and metrics.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/base/buildinfo"
	"github.com/kjob/kjob/internal/base/configerr"
)

// Flags is a flag set whose flags each mirror an environment variable: the
// variable sets the value, a flag on the command line overrides it. Every
// Flags has --help and --version.
type Flags struct {
	fs      *flag.FlagSet
	name    string
	usage   string
	out     io.Writer
	envs    []envFlag
	ranges  []intRange
	fields  map[string]string // config field -> flag name (Flag.Feeds)
	rules   []rule            // Flag.Require
	version bool
}

// Flag is a flag just registered: Feeds records the config fields it
// fills, so an error about one of those fields names the flag.
type Flag struct {
	f    *Flags
	name string
}

// Feeds records that the flag fills the config fields named (as a
// *configerr.Error names them, e.g. "WorkerConfig.ClaimTTL"): ConfigError
// then names the flag in an error about any of them. It returns the flag.
func (fl *Flag) Feeds(fields ...string) *Flag {
	if fl.f.fields == nil {
		fl.f.fields = map[string]string{}
	}
	for _, field := range fields {
		fl.f.fields[field] = fl.name
	}
	return fl
}

// Require makes Parse refuse the flag's value when check, called after
// parsing, returns a reason (what is wrong and the fix; "" accepts it):
// the error is the flag's Ref, ": ", then the reason. It is for what the
// command line reads differently from the config, such as a 0 that a flag
// means literally and the config reads as "the default"; rules of the
// config itself are the config's to check.
func (fl *Flag) Require(check func() string) *Flag {
	fl.f.rules = append(fl.f.rules, rule{fl.name, check})
	return fl
}

// rule is a Flag.Require.
type rule struct {
	name  string
	check func() string
}

// ConfigError prefixes err, when it is about config fields that flags
// feed (Flag.Feeds), with those flags, as WithFlags does with the fields
// recorded at registration. When err holds a *configerr.Error whose field
// a flag feeds, the value given is wrong, and the result also wraps
// ErrUsage (the binaries exit 2, as for a flag that does not parse). Any
// other error is returned as it is.
func (f *Flags) ConfigError(err error) error {
	out := f.WithFlags(err, f.fields)
	if ce := configerr.As(err); ce != nil {
		if _, ok := f.fields[ce.Field]; ok {
			return &usage{out}
		}
	}
	return out
}

type envFlag struct{ name, env string }

// intRange bounds an int flag: Parse rejects a value outside [lo, hi].
type intRange struct {
	name   string
	p      *int
	lo, hi int
}

// ErrUsage is wrapped by every error Parse and ParseInterspersed return
// about the command line or the environment (an unknown flag, a value that
// does not parse or is out of range, a stray argument): the binaries exit
// 2 on it.
var ErrUsage = errors.New("usage error")

// usageError is a command-line mistake: one line, with a hint to --help.
type usageError struct{ name, msg string }

func (e *usageError) Error() string {
	return fmt.Sprintf("%s (run \"%s --help\" for the flags)", e.msg, e.name)
}

func (e *usageError) Is(target error) bool { return target == ErrUsage }

// usage marks err, whose text stays as it is, as a usage error.
type usage struct{ err error }

func (e *usage) Error() string   { return e.err.Error() }
func (e *usage) Unwrap() []error { return []error{e.err, ErrUsage} }

// errVersion is what Parse returns after printing the version: it is a
// flag.ErrHelp, so the binaries exit 0 on it as on --help.
var errVersion = fmt.Errorf("version printed: %w", flag.ErrHelp)

// NewFlags returns a flag set for a command. name is how the user runs it
// ("worker", "kjobctl status"); usage is printed above the flag list by
// --help.
func NewFlags(name, usage string) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Parse returns errors; they are printed once, by the binary, as one
	// line. Only --help prints the usage (to the output, SetOutput).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f := &Flags{fs: fs, name: name, usage: usage, out: os.Stdout}
	fs.BoolVar(&f.version, "version", false, "print the version (the module version and VCS revision this binary was built from) and exit")
	return f
}

// printUsage writes the usage text and every flag with its variable and
// default to the output.
func (f *Flags) printUsage() {
	out := f.out
	fmt.Fprintf(out, "%s\n\nFlags (each can also be set by the environment variable shown):\n", strings.TrimSpace(f.usage))
	f.fs.VisitAll(func(fl *flag.Flag) {
		env := ""
		for _, e := range f.envs {
			if e.name == fl.Name {
				env = e.env
			}
		}
		typ, help := flag.UnquoteUsage(fl)
		fmt.Fprintf(out, "  --%s %s\n", fl.Name, typ)
		if env != "" {
			fmt.Fprintf(out, "        [%s] ", env)
		} else {
			fmt.Fprint(out, "        ")
		}
		fmt.Fprint(out, help)
		if fl.DefValue != "" && fl.DefValue != "0" && fl.DefValue != "0s" && fl.DefValue != "false" {
			if typ == "string" {
				fmt.Fprintf(out, " (default %q)", fl.DefValue)
			} else {
				fmt.Fprintf(out, " (default %s)", fl.DefValue)
			}
		}
		fmt.Fprintln(out)
	})
}

// SetOutput sets where --help and --version print (default os.Stdout).
// Errors are returned, not printed.
func (f *Flags) SetOutput(w io.Writer) { f.out = w }

func (f *Flags) env(name, env string) {
	if env != "" {
		f.envs = append(f.envs, envFlag{name, env})
	}
}

// String defines a string flag mirrored by env.
func (f *Flags) String(p *string, name, env, def, help string) *Flag {
	f.fs.StringVar(p, name, def, help)
	f.env(name, env)
	return &Flag{f, name}
}

// Int defines an int flag mirrored by env.
func (f *Flags) Int(p *int, name, env string, def int, help string) *Flag {
	f.fs.IntVar(p, name, def, help)
	f.env(name, env)
	return &Flag{f, name}
}

// IntRange defines an int flag mirrored by env whose value must lie in
// [lo, hi]: Parse rejects any other value, naming flag, variable, value and
// range (so a value cannot wrap around when converted to a narrower type).
func (f *Flags) IntRange(p *int, name, env string, def, lo, hi int, help string) *Flag {
	f.ranges = append(f.ranges, intRange{name: name, p: p, lo: lo, hi: hi})
	return f.Int(p, name, env, def, help)
}

// Bool defines a bool flag mirrored by env.
func (f *Flags) Bool(p *bool, name, env string, def bool, help string) *Flag {
	f.fs.BoolVar(p, name, def, help)
	f.env(name, env)
	return &Flag{f, name}
}

// Duration defines a duration flag mirrored by env.
func (f *Flags) Duration(p *time.Duration, name, env string, def time.Duration, help string) *Flag {
	f.fs.DurationVar(p, name, def, help)
	f.env(name, env)
	return &Flag{f, name}
}

// Parse applies the environment, then the command line, then checks the
// bounds of IntRange flags. It refuses positional arguments (a stray word
// would otherwise end flag parsing silently, and every flag after it would
// be ignored); commands that take some use ParseInterspersed. An invalid
// value names the variable or flag, the value and the expected form; every
// such error wraps ErrUsage. --help prints the usage and --version the
// version, and both return an error wrapping flag.ErrHelp.
func (f *Flags) Parse(args []string) error {
	pos, err := f.ParseInterspersed(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return &usageError{f.name, fmt.Sprintf("unexpected argument %q: %s takes no arguments, only flags", pos[0], f.name)}
	}
	return nil
}

// parseArgs parses one run of flags (up to the first positional argument
// or "--"), turning the flag package's errors into usage errors.
func (f *Flags) parseArgs(args []string) error {
	err := f.fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		f.printUsage()
		return flag.ErrHelp
	case err != nil:
		return &usageError{f.name, f.explainParse(err)}
	case f.version:
		fmt.Fprintf(f.out, "%s %s\n", f.name, buildinfo.Version())
		return errVersion
	}
	return nil
}

// explainParse rewrites the flag package's messages in the form kjob's
// other errors take: the flag, the value, what is wanted.
func (f *Flags) explainParse(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("unknown flag --%s", strings.TrimPrefix(name, "-"))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("flag --%s needs a value", strings.TrimPrefix(name, "-"))
	}
	if m := reInvalidValue.FindStringSubmatch(msg); m != nil {
		name := m[2]
		val, uerr := strconv.Unquote(m[1])
		if uerr != nil {
			val = m[1]
		}
		fl := f.fs.Lookup(name)
		want := ""
		if fl != nil {
			typ, _ := flag.UnquoteUsage(fl)
			want = ": want " + expected[typ]
		}
		why := m[3]
		if why == "parse error" { // the flag package's word for "not a number" etc.: the form wanted says more
			return fmt.Sprintf("--%s %q%s", name, val, want)
		}
		return fmt.Sprintf("--%s %q: %s%s", name, val, why, want)
	}
	return msg
}

// reInvalidValue matches the flag package's "invalid value" and "invalid
// boolean value" messages: value (quoted), flag name, cause.
var reInvalidValue = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-(\S+): (.*)$`)

// parseEnv applies the environment variables that are set.
func (f *Flags) parseEnv() error {
	for _, e := range f.envs {
		v, ok := os.LookupEnv(e.env)
		if !ok {
			continue
		}
		if err := f.fs.Set(e.name, v); err != nil {
			typ, _ := flag.UnquoteUsage(f.fs.Lookup(e.name))
			return &usage{fmt.Errorf("environment variable %s=%q: %v: want %s (flag --%s)", e.env, v, cause(err), expected[typ], e.name)}
		}
	}
	return nil
}

// check enforces the IntRange bounds, then the Require rules.
func (f *Flags) check() error {
	for _, r := range f.ranges {
		if *r.p < r.lo || *r.p > r.hi {
			return f.Errorf(r.name, "out of range: want a whole number from %d to %d", r.lo, r.hi)
		}
	}
	for _, r := range f.rules {
		if why := r.check(); why != "" {
			return f.Errorf(r.name, "%s", why)
		}
	}
	return nil
}

// Ref names flag name the way a user sets it, with its current value:
// "--name/ENV=value" ("--name=value" if no variable mirrors it; `""` for
// an empty value).
func (f *Flags) Ref(name string) string {
	fl := f.fs.Lookup(name)
	if fl == nil {
		return "--" + name // a programming error; still say what was meant
	}
	ref := "--" + name
	for _, e := range f.envs {
		if e.name == name {
			ref += "/" + e.env
		}
	}
	v := fl.Value.String()
	if v == "" {
		v = `""`
	}
	return ref + "=" + v
}

// Errorf returns an error about flag name's value: its Ref, ": ", then the
// formatted message (which may wrap with %w). Say what is wrong and how
// to fix it. It wraps ErrUsage: the value given is wrong.
func (f *Flags) Errorf(name, format string, args ...any) error {
	return &usage{fmt.Errorf("%s: "+format, append([]any{f.Ref(name)}, args...)...)}
}

// WithFlags prefixes err, when it is about library configuration fields
// (a *configerr.Error, or another configerr.Fielder such as
// topic.MismatchError, anywhere in its tree), with the flags the user set
// those fields through: fields maps a library field as the error names it
// (e.g. "Config.RenewInterval") to the flag that feeds it (e.g.
// "lease-renew"). Each mapped field adds its flag's Ref, the error's own
// field first, then the fields its reason involves, each flag once. An
// error naming no mapped field is returned as it is. The result wraps err.
func (f *Flags) WithFlags(err error, fields map[string]string) error {
	if err == nil {
		return nil
	}
	var refs []string
	for _, field := range configerr.Fields(err) {
		if name, ok := fields[field]; ok {
			if r := f.Ref(name); !slices.Contains(refs, r) {
				refs = append(refs, r)
			}
		}
	}
	if len(refs) == 0 {
		return err
	}
	return fmt.Errorf("%s: %w", strings.Join(refs, ", "), err)
}

// InFlags rewrites err, when it holds a *configerr.Error about a field in
// flags, in the words of a command line: the error's field and the fields
// its reason involves named by their flags (flags maps a library field,
// e.g. "ReplaySpec.Partitions", to its flag, e.g. "partition"), so
// "replay: ReplaySpec.Partitions = 9: no such partition" reads "replay:
// --partition 9: no such partition". The result wraps err (errors.Is and
// errors.As see through it); any other error is returned as it is.
func InFlags(err error, flags map[string]string) error {
	ce := configerr.As(err)
	if ce == nil {
		return err
	}
	if _, ok := flags[ce.Field]; !ok {
		return err
	}
	msg := ce.Message(func(field string) (string, bool) {
		name, ok := flags[field]
		return "--" + name, ok
	})
	return &reworded{msg: strings.Replace(err.Error(), ce.Error(), msg, 1), err: err}
}

// reworded is an error with other words for the error it wraps.
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }

var expected = map[string]string{
	"duration": `a duration such as "5s" or "1m30s"`,
	"int":      "a whole number",
	"":         "true or false",
	"string":   "a string",
}

func cause(err error) error {
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
}

// Args returns the non-flag arguments.
func (f *Flags) Args() []string { return f.fs.Args() }

// Logger builds the process logger: format "text" or "json", level "debug",
// "info", "warn" or "error".
func Logger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// RedisOptions selects a Redis deployment.
type RedisOptions struct {
	// URL is redis:// or rediss:// for a single server.
	URL string
	// Addrs, comma-separated, selects a Cluster (one address or more), or a
	// Sentinel set when MasterName is set; it overrides URL's address.
	Addrs string
	// MasterName is the Sentinel master name.
	MasterName string
	// Security holds the TLS files and the password file (security.go).
	Security RedisSecurity
}

// Register adds the Redis flags.
func (o *RedisOptions) Register(f *Flags) {
	f.String(&o.URL, "redis-url", "KJOB_REDIS_URL", "redis://127.0.0.1:6379/0", "Redis URL (redis:// or rediss:// for TLS; user:password@ for ACL users)")
	f.String(&o.Addrs, "redis-addrs", "KJOB_REDIS_ADDRS", "", "comma-separated Redis Cluster nodes, or Sentinels with --redis-master (overrides the URL's address)")
	f.String(&o.MasterName, "redis-master", "KJOB_REDIS_MASTER", "", "Sentinel master name")
	o.Security.register(f)
}

// User returns the Redis ACL user the URL names ("default" when it names
// none), for messages.
func (o RedisOptions) User() string {
	if opt, err := redis.ParseURL(o.URL); err == nil && opt.Username != "" {
		return opt.Username
	}
	return "default"
}

// Client returns a go-redis UniversalClient: a single server, a Sentinel
// failover client or a Cluster client, per the options.
func (o RedisOptions) Client() (redis.UniversalClient, error) {
	opt, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("--redis-url %q: %v; want redis://[user:password@]host:port/db", o.URL, err)
	}
	u := &redis.UniversalOptions{
		Addrs: []string{opt.Addr}, DB: opt.DB, Username: opt.Username, Password: opt.Password,
		TLSConfig: opt.TLSConfig, MasterName: o.MasterName,
		// Honour context deadlines, so a hung server cannot hold up the
		// lease's renewals or the worker's claims past their deadlines.
		ContextTimeoutEnabled: true,
	}
	if o.Addrs != "" {
		u.Addrs = strings.Split(o.Addrs, ",")
		if o.MasterName == "" {
			// Without a Sentinel master name the addresses are Cluster
			// nodes, even one (a configuration endpoint): go-redis would
			// otherwise treat a single address as a plain server and every
			// script would be answered with MOVED.
			u.IsClusterMode = true
			if u.DB != 0 {
				return nil, fmt.Errorf("--redis-url %q selects db %d, but --redis-addrs selects a Redis Cluster, which has only db 0: drop the /%d from the URL", o.URL, u.DB, u.DB)
			}
		}
	}
	if err := o.Security.apply(u); err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(u), nil
}

// Exit codes of the producer and worker binaries.
const (
	// ExitOK: the process stopped as asked (or --help, --version).
	ExitOK = 0
	// ExitError: it could not run or stopped on an error.
	ExitError = 1
	// ExitUsage: a flag, variable or argument is wrong (ErrUsage).
	ExitUsage = 2
)

// Exit prints err (if any) to stderr as "name: err" and returns the exit
// code for it: ExitOK for nil and for --help/--version, ExitUsage for
// ErrUsage, ExitError otherwise.
func Exit(stderr io.Writer, name string, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return ExitError
}

// Brokers checks a comma-separated list of Kafka seed brokers, each
// host:port with a port from 1 to 65535, and returns it split. A franz-go
// client would otherwise retry an address that can never be dialled
// forever. The error names the broker and the fix; callers prefix the
// flag (Flags.Errorf).
func Brokers(s string) ([]string, error) {
	list := strings.Split(s, ",")
	for _, b := range list {
		host, port, err := net.SplitHostPort(strings.TrimSpace(b))
		if err != nil {
			why := err.Error()
			if ae := (*net.AddrError)(nil); errors.As(err, &ae) {
				why = ae.Err
			}
			return nil, fmt.Errorf("broker %q: %s: want host:port, e.g. kafka-1:9092 (several comma-separated)", b, why)
		}
		if host == "" {
			return nil, fmt.Errorf("broker %q: no host: want host:port, e.g. kafka-1:9092", b)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("broker %q: port %q is not a number from 1 to 65535: want host:port, e.g. kafka-1:9092", b, port)
		}
	}
	return list, nil
}
