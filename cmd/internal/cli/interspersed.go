package cli

// ParseInterspersed is Parse for commands whose positional arguments may
// come before, between or after the flags ("kjobctl backfill JOB --from
// T"). It returns the positional arguments; "--" ends flag parsing. Its
// errors are Parse's.
func (f *Flags) ParseInterspersed(args []string) ([]string, error) {
	if err := f.parseEnv(); err != nil {
		return nil, err
	}
	var pos []string
	for {
		if err := f.parseArgs(args); err != nil {
			return nil, err
		}
		rest := f.fs.Args()
		if len(rest) == 0 {
			return pos, f.check()
		}
		// flag stops at "--" (consumed) or the first non-flag.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), f.check()
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
