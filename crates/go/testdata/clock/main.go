// A program that shows what it reads of the world: the clock, entropy, map order,
// select's choice, a sleep, a timer and a signal handler, then exits with status 3;
// and what its initialisation read.
package main

import (
	"crypto/rand"
	"fmt"
	mrand "math/rand"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Drawn and printed during initialisation: from the snapshot reconsim takes after it,
// the same for every seed. CLOCK_INIT_SLEEP makes initialisation wait, so that no
// snapshot can be taken.
var initDraw = mrand.Intn(1000)

func init() {
	fmt.Println("init", time.Now().UTC().Format(time.RFC3339Nano), initDraw)
	if os.Getenv("CLOCK_INIT_SLEEP") != "" {
		time.Sleep(time.Second)
		fmt.Println("init slept")
	}
}

func main() {
	start := time.Now()
	fmt.Println("start", start.UTC().Format(time.RFC3339Nano))
	b := make([]byte, 4)
	rand.Read(b)
	fmt.Println("crypto", b, "math", mrand.Intn(1000))
	m := map[int]int{}
	for i := range 16 {
		m[i] = i
	}
	order := ""
	for k := range m {
		order += fmt.Sprint(k, " ")
	}
	fmt.Println("map", order)
	a, c := make(chan int, 8), make(chan int, 8)
	for i := range 8 {
		a <- i
		c <- i
	}
	picks := ""
	for range 8 {
		select {
		case <-a:
			picks += "a"
		case <-c:
			picks += "c"
		}
	}
	fmt.Println("select", picks)
	fmt.Fprintln(os.Stderr, "to stderr")
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	t := time.NewTimer(30 * time.Second)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		fmt.Println("slept", time.Since(start))
	}()
	select {
	case <-t.C:
		fmt.Println("timer", time.Since(start))
	case <-ch:
		fmt.Println("signal")
	}
	os.Exit(3)
}
