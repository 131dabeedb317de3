package controller_test

import (
	"os"
	"testing"

	"example.invalid/reconsim/reconsimtest"
)

// TestConfigSetUnderReconsim holds the controller to its scenarios in reconsim: the
// fixed variant clean over its budget, the buggy one caught. CONFIGSET_READS=cache
// runs the clean scenario against the buggy variant instead, which fails the test
// with the command that replays the failure.
func TestConfigSetUnderReconsim(t *testing.T) {
	var opts []reconsimtest.Option
	if reads := os.Getenv("CONFIGSET_READS"); reads != "" {
		opts = append(opts, reconsimtest.Set("controllers.go[0].args", `["--configmap-reads=`+reads+`"]`))
	}
	reconsimtest.CheckWith(t, []string{"../../testdata/configset-go-fixed.json"}, opts...)
	if len(opts) == 0 {
		reconsimtest.Check(t, "../../testdata/configset-go-buggy.json")
	}
}
