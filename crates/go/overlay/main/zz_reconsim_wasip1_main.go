//go:build wasip1

// This file is added to the program's main package when reconsim builds it (go
// build -overlay, -buildmode=c-shared): reconsim runs Go's initialisation
// (_initialize) once, keeps the state it leaves, and starts each run's main from it,
// with the signals its kubelet sends delivered to os/signal.

package main

import (
	reconsimNet "net"
	reconsimOS "os"
	_ "os/signal" // reconsimProcess
	reconsimUnsafe "unsafe"
)

//go:linkname reconsimReseed runtime.reconsimReseed
func reconsimReseed()

//go:linkname reconsimProcess os/signal.reconsimProcess
func reconsimProcess(n int) bool

// reconsimSignals reads the signals the program's kubelet sends (SIGTERM when its pod
// is deleted) from a socket of reconsim's own, and hands each to os/signal; one no
// channel asked for ends the program, as its default action would (128 + its number).
func reconsimSignals() {
	addr := []byte("reconsim.signals")
	var fd int32
	if reconsimDial(reconsimUnsafe.Pointer(&addr[0]), uint32(len(addr)), reconsimUnsafe.Pointer(&fd)) != 0 {
		return
	}
	f := reconsimOS.NewFile(uintptr(fd), "reconsim.signals")
	c, err := reconsimNet.FileConn(f)
	f.Close()
	if err != nil {
		return
	}
	go func() {
		b := make([]byte, 1)
		for {
			if _, err := c.Read(b); err != nil {
				return
			}
			if !reconsimProcess(int(b[0])) {
				reconsimOS.Exit(128 + int(b[0]))
			}
		}
	}()
}

// reconsimMain is the program's main as the run starts it: the runtime's random
// state drawn from the run's entropy, then main, then the exit Go's runtime makes
// when main returns.
//
//go:wasmexport reconsim_main
func reconsimMain() {
	reconsimReseed()
	reconsimSignals()
	main()
	reconsimOS.Exit(0)
}
