package kjob

import (
	"errors"

	"github.com/kjob/kjob/internal/base/configerr"
)

// ConfigError is a configuration value NewWorker, NewProducer or Run
// cannot accept: which field, the value given, and what is wrong with how
// to fix it. Branch on it with errors.As:
//
//	var ce *kjob.ConfigError
//	if errors.As(err, &ce) {
//		log.Fatalf("fix %s: %v", ce.Field, err)
//	}
//
// Its text is the full error, for example "kjob: WorkerConfig.Grace =
// -1s is negative; set a positive duration, or 0 for the default 30s".
// It wraps the error it describes, so errors.Is still finds a cause such
// as redis.ErrClosed.
type ConfigError struct {
	// Field is the setting as the config names it, for example
	// "WorkerConfig.Grace" or "ProducerConfig.Brokers[0]".
	Field string
	// Value is the value given; nil when the field is unset (empty, nil).
	Value any
	// Reason says what is wrong and how to fix it, for example "is
	// negative; set a positive duration, or 0 for the default 30s".
	Reason string
	// Related lists the other fields the reason involves, for example
	// "WorkerConfig.ClaimTTL" for a claim extension that must stay below
	// ClaimTTL/2.
	Related []string

	err error
}

// Error returns the error's full text, which names Field, Value and
// Reason.
func (e *ConfigError) Error() string { return e.err.Error() }

// Unwrap returns the error it describes.
func (e *ConfigError) Unwrap() error { return e.err }

// asConfigError returns err as a *ConfigError when a configuration error
// is in its tree, with err's text and err wrapped; any other error
// (including nil and one already a *ConfigError) is returned as it is.
func asConfigError(err error) error {
	if err == nil {
		return nil
	}
	if ce, ok := err.(*ConfigError); ok {
		return ce
	}
	var ie *configerr.Error
	if !errors.As(err, &ie) {
		return err
	}
	return &ConfigError{Field: ie.Field, Value: ie.Value, Reason: ie.Reason, Related: ie.Related, err: err}
}
