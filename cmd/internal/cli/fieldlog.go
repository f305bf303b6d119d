package cli

import (
	"context"
	"log/slog"
	"slices"
	"strings"
)

// NameFields returns msg with each config field a flag feeds (Flag.Feeds)
// named as the user sets it, "--name/ENV": the library's messages name
// its config fields ("WorkerConfig.HTTPAllowHosts is empty"), a binary's
// user knows the flags.
func (f *Flags) NameFields(msg string) string {
	if !strings.Contains(msg, "Config.") {
		return msg
	}
	fields := make([]string, 0, len(f.fields))
	for field := range f.fields {
		fields = append(fields, field)
	}
	// Longest first, so a field is never renamed inside a longer one.
	slices.SortFunc(fields, func(a, b string) int { return len(b) - len(a) })
	for _, field := range fields {
		if strings.Contains(msg, field) {
			msg = strings.ReplaceAll(msg, field, f.label(f.fields[field]))
		}
	}
	return msg
}

// label names flag name as "--name/ENV" ("--name" if no variable mirrors
// it), without its value.
func (f *Flags) label(name string) string {
	l := "--" + name
	for _, e := range f.envs {
		if e.name == name {
			l += "/" + e.env
		}
	}
	return l
}

// fieldNamer is a slog.Handler that names config fields in messages by
// their flags (Flags.NameFields).
type fieldNamer struct {
	slog.Handler
	f *Flags
}

// nameFieldsIn wraps h so that log messages name config fields by their
// flags.
func (f *Flags) nameFieldsIn(h slog.Handler) slog.Handler { return fieldNamer{h, f} }

func (h fieldNamer) Handle(ctx context.Context, r slog.Record) error {
	if msg := h.f.NameFields(r.Message); msg != r.Message {
		nr := slog.NewRecord(r.Time, r.Level, msg, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			nr.AddAttrs(a)
			return true
		})
		r = nr
	}
	return h.Handler.Handle(ctx, r)
}

func (h fieldNamer) WithAttrs(attrs []slog.Attr) slog.Handler {
	return fieldNamer{h.Handler.WithAttrs(attrs), h.f}
}

func (h fieldNamer) WithGroup(name string) slog.Handler {
	return fieldNamer{h.Handler.WithGroup(name), h.f}
}
