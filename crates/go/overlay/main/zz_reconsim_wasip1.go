//go:build wasip1

// This file is added to the program's main package when reconsim builds it
// (go build -overlay): Go on wasip1 has no outbound sockets, so the default HTTP
// transport dials through the simulation's network instead. Nothing else of the
// program changes.

package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"syscall"
	"unsafe"
)

//go:wasmimport reconsim dial
func reconsimDial(addr unsafe.Pointer, addrLen uint32, fd unsafe.Pointer) uint32

func reconsimDialContext(ctx context.Context, network, address string) (net.Conn, error) {
	b := []byte(address)
	if len(b) == 0 {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.EINVAL}
	}
	var fd int32
	if errno := reconsimDial(unsafe.Pointer(&b[0]), uint32(len(b)), unsafe.Pointer(&fd)); errno != 0 {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.Errno(errno)}
	}
	f := os.NewFile(uintptr(fd), address)
	c, err := net.FileConn(f)
	f.Close()
	return c, err
}

func init() {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t.DialContext = reconsimDialContext
	}
}
