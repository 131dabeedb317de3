// Copyright 2023 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build wasip1

package runtime

// This file is Go 1.26's src/runtime/lock_wasip1.go with one change, marked
// "reconsim": a goroutine waiting on a note with no deadline parks. reconsim builds
// Go programs with it as an overlay (go build -overlay); see crates/go/overlay.

import "unsafe"

// note.key: 0 while nobody waits, note_woken once woken, else the waiting g.
const note_woken = 1

// wasm has no support for threads yet. There is no preemption.
// See proposal: https://github.com/WebAssembly/threads
// Waiting for a mutex or timeout is implemented as a busy loop
// while allowing other goroutines to run.

const (
	mutex_unlocked = 0
	mutex_locked   = 1

	active_spin     = 4
	active_spin_cnt = 30
)

type mWaitList struct{}

func lockVerifyMSize() {}

func mutexContended(l *mutex) bool {
	return false
}

func lock(l *mutex) {
	lockWithRank(l, getLockRank(l))
}

func lock2(l *mutex) {
	if l.key == mutex_locked {
		// wasm is single-threaded so we should never
		// observe this.
		throw("self deadlock")
	}
	gp := getg()
	if gp.m.locks < 0 {
		throw("lock count")
	}
	gp.m.locks++
	l.key = mutex_locked
}

func unlock(l *mutex) {
	unlockWithRank(l)
}

func unlock2(l *mutex) {
	if l.key == mutex_unlocked {
		throw("unlock of unlocked lock")
	}
	gp := getg()
	gp.m.locks--
	if gp.m.locks < 0 {
		throw("lock count")
	}
	l.key = mutex_unlocked
}

// One-time notifications.
func noteclear(n *note) {
	n.key = 0
}

func notewakeup(n *note) {
	if n.key == note_woken {
		print("notewakeup - double wakeup (", n.key, ")\n")
		throw("notewakeup - double wakeup")
	}
	waiter := n.key
	n.key = note_woken
	if waiter != 0 {
		// reconsim: the goroutine parked in notetsleepg runs again.
		goready(guintptr(waiter).ptr(), 1)
	}
}

func notesleep(n *note) {
	throw("notesleep not supported by wasi")
}

func notetsleep(n *note, ns int64) bool {
	throw("notetsleep not supported by wasi")
	return false
}

// same as runtime·notetsleep, but called on user g (not g0)
func notetsleepg(n *note, ns int64) bool {
	gp := getg()
	if gp == gp.m.g0 {
		throw("notetsleepg on g0")
	}

	if ns < 0 {
		// reconsim: park until notewakeup, as lock_js.go does, instead of yielding
		// in a loop. os/signal's receiver (signal.Notify, so every
		// controller-runtime manager) waits here for ever; yielding, it stays
		// runnable, and the scheduler never idles into netpoll: the program never
		// learns that a socket is readable (docs/go.md).
		for n.key != note_woken {
			n.key = uintptr(unsafe.Pointer(gp))
			gopark(nil, nil, waitReasonZero, traceBlockGeneric, 1)
		}
		return true
	}

	deadline := nanotime() + ns
	for {
		if n.key != 0 {
			return true
		}
		if sched_yield() != 0 {
			throw("sched_yield failed")
		}
		Gosched()
		if ns >= 0 && nanotime() >= deadline {
			return false
		}
	}
}

func beforeIdle(int64, int64) (*g, bool) {
	return nil, false
}

func checkTimeouts() {}

//go:wasmimport wasi_snapshot_preview1 sched_yield
func sched_yield() errno
