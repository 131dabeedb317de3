//go:build wasip1

// This file is added to os/signal when reconsim builds a program (go build
// -overlay). wasip1 has no signals: the runtime's signal queue has no room for one
// (_NSIG is 0), so signal.Notify registers a channel that nothing ever fills.
// reconsim's overlay reads the signals the program's kubelet sends (SIGTERM when its
// pod is deleted) and hands each to the channels Notify registered, as the signal
// loop of a Unix port does.

package signal

import (
	"syscall"
	_ "unsafe" // for go:linkname
)

// reconsimProcess delivers signal n to the channels registered for it; false if
// none is, and then SIGTERM's default action, the end of the process, is the
// caller's to take.
//
//go:linkname reconsimProcess
func reconsimProcess(n int) bool {
	handlers.Lock()
	wanted := n >= 0 && n < numSig && handlers.ref[n] > 0
	handlers.Unlock()
	if !wanted {
		return false
	}
	process(syscall.Signal(n))
	return true
}
