//go:build wasip1

// This file is added to the program's main package when reconsim builds it (go
// build -overlay, -buildmode=c-shared): reconsim runs Go's initialisation
// (_initialize) once, keeps the state it leaves, and starts each run's main from it.

package main

import (
	reconsimOS "os"
	_ "unsafe" // for go:linkname
)

//go:linkname reconsimReseed runtime.reconsimReseed
func reconsimReseed()

// reconsimMain is the program's main as the run starts it: the runtime's random
// state drawn from the run's entropy, then main, then the exit Go's runtime makes
// when main returns.
//
//go:wasmexport reconsim_main
func reconsimMain() {
	reconsimReseed()
	main()
	reconsimOS.Exit(0)
}
