package cli

import (
	"errors"
	"strings"
	"testing"
)

func TestBrokers(t *testing.T) {
	if got, err := Brokers("a:9092,10.0.0.1:9093,[::1]:9094"); err != nil || len(got) != 3 {
		t.Errorf("valid brokers: %v %v", got, err)
	}
	for in, want := range map[string]string{
		"nonsense:99999": `broker "nonsense:99999": port "99999" is not a number from 1 to 65535: want host:port, e.g. kafka-1:9092`,
		"kafka":          `broker "kafka": missing port in address: want host:port`,
		"a:1,,b:2":       `broker "": missing port in address`,
		":9092":          `broker ":9092": no host`,
	} {
		if _, err := Brokers(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Brokers(%q) = %v, want %q", in, err, want)
		}
	}
	// Through a flag set, the error names the flag, its variable and value,
	// and is a usage error.
	f := NewFlags("t", "t")
	var b string
	f.String(&b, "brokers", "KJOB_T_BROKERS", "", "")
	t.Setenv("KJOB_T_BROKERS", "nonsense:99999")
	if err := f.Parse(nil); err != nil {
		t.Fatal(err)
	}
	_, berr := Brokers(b)
	err := f.Errorf("brokers", "%v", berr)
	if !errors.Is(err, ErrUsage) || !strings.HasPrefix(err.Error(), `--brokers/KJOB_T_BROKERS=nonsense:99999: broker "nonsense:99999": port`) {
		t.Errorf("err = %v", err)
	}
}
