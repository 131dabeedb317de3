// Package reconsimtest runs reconsim from go test: each scenario file is held to its
// expectation over its budget of runs (`reconsim check`), and each one that does not
// hold is reported through t.Error with the command that replays its failure.
//
//	func TestConfigSet(t *testing.T) {
//		reconsimtest.Check(t, "testdata/configset-go-fixed.json")
//	}
//
// The reconsim binary is $RECONSIM if set, else `reconsim` on the PATH
// (`cargo install --path . --profile dist` in a reconsim checkout). Failures are saved
// in $RECONSIM_FAILURES_DIR, else in a new folder under the system's temporary one,
// kept after the test.
package reconsimtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Option changes how Check runs.
type Option func(*options)

type options struct {
	sets []string
	jobs int
}

// Set changes one field of each scenario for this check, as `reconsim check --set
// PATH=VALUE` does: Set(`controllers.go[0].args`, `["--configmap-reads=cache"]`).
func Set(path, value string) Option {
	return func(o *options) { o.sets = append(o.sets, path+"="+value) }
}

// Jobs sets the threads reconsim runs on (default: the machine's cores); the verdict
// is the same for any.
func Jobs(n int) Option {
	return func(o *options) { o.jobs = n }
}

// verdict is what `reconsim check --json` prints of one scenario.
type verdict struct {
	Scenario     string `json:"scenario"`
	Expect       string `json:"expect"`
	Holds        bool   `json:"holds"`
	Runs         uint64 `json:"runs"`
	Seeds        string `json:"seeds"`
	Invariant    string `json:"invariant"`
	OutOfTime    bool   `json:"out_of_time"`
	FirstFailure *struct {
		Replay string `json:"replay"`
	} `json:"first_failure"`
}

type report struct {
	Scenarios []verdict `json:"scenarios"`
	Holds     bool      `json:"holds"`
}

// Binary is the reconsim binary Check runs.
func Binary() string {
	if b := os.Getenv("RECONSIM"); b != "" {
		return b
	}
	return "reconsim"
}

// Check holds each scenario file to its expectation (`expect` in the file: a `clean`
// one must have no failing run, a `violation` one some) and reports each that does
// not through t.Error. A scenario reconsim cannot load fails the test with its error.
func Check(t testing.TB, scenarios ...string) {
	t.Helper()
	CheckWith(t, scenarios)
}

// CheckWith is Check with options.
func CheckWith(t testing.TB, scenarios []string, opts ...Option) {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	check(t, scenarios, &o)
}

func check(t testing.TB, scenarios []string, o *options) {
	t.Helper()
	if len(scenarios) == 0 {
		t.Fatal("reconsimtest.Check: no scenario named")
	}
	// Failures are kept after the test (t.TempDir would remove them), so the replay
	// command each error prints still works.
	dir := os.Getenv("RECONSIM_FAILURES_DIR")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "reconsim-failures-"); err != nil {
			t.Fatalf("a folder for failures: %v", err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("RECONSIM_FAILURES_DIR: %v", err)
	}
	args := []string{"check", "--json", "--failures-dir", dir}
	for _, s := range o.sets {
		args = append(args, "--set", s)
	}
	if o.jobs > 0 {
		args = append(args, "--jobs", fmt.Sprint(o.jobs))
	}
	args = append(args, scenarios...)
	cmd := exec.Command(Binary(), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		// Some scenario does not hold: the report says which.
	case err != nil:
		t.Fatalf("reconsim %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var r report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("reconsim check --json printed no report (%v):\n%s\n%s", err, stdout.String(), stderr.String())
	}
	for _, v := range r.Scenarios {
		if v.Holds {
			t.Logf("%s holds: expect %s, %d runs", v.Scenario, v.Expect, v.Runs)
			continue
		}
		switch {
		case v.Expect == "clean" && v.FirstFailure != nil:
			t.Errorf("%s: expected clean, but %s is violated; replay: %s", v.Scenario, v.Invariant, v.FirstFailure.Replay)
		case v.OutOfTime:
			t.Errorf("%s: its time budget ran out after %d runs, before a verdict", v.Scenario, v.Runs)
		default:
			t.Errorf("%s: expected a violation, none in %d runs over seeds %s", v.Scenario, v.Runs, v.Seeds)
		}
	}
}
