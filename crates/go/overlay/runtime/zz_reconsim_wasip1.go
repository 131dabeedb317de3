//go:build wasip1

// This file is added to the runtime when reconsim builds a program (go build
// -overlay). reconsim starts each run of a program from its state after Go's
// initialisation (a snapshot), and then draws the runtime's random state anew from
// the run's entropy, so that map order, select and math/rand follow each run's seed.

package runtime

import _ "unsafe" // for go:linkname

// reconsimReseed seeds the runtime's random state from random_get, as randinit and
// mrandinit do at start-up.
//
//go:linkname reconsimReseed
func reconsimReseed() {
	lock(&globalRand.lock)
	var seed [32]byte
	if readRandom(seed[:]) != len(seed) {
		unlock(&globalRand.lock)
		fatal("reconsim: random_get failed")
	}
	globalRand.state.Init(seed)
	unlock(&globalRand.lock)
	for mp := allm; mp != nil; mp = mp.alllink {
		mrandinit(mp)
	}
}
