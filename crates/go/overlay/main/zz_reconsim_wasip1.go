//go:build wasip1

// This file is added to the program's main package when reconsim builds it
// (go build -overlay): Go on wasip1 has no outbound sockets, so the default HTTP
// transport dials through the simulation's network instead. Nothing else of the
// program changes.

package main

// Every import is named apart: these names share the main package's file scope
// with the user's own declarations.
import (
	reconsimContext "context"
	reconsimNet "net"
	reconsimHTTP "net/http"
	reconsimOS "os"
	reconsimSyscall "syscall"
	reconsimUnsafe "unsafe"
)

//go:wasmimport reconsim dial
func reconsimDial(addr reconsimUnsafe.Pointer, addrLen uint32, fd reconsimUnsafe.Pointer) uint32

func reconsimDialContext(ctx reconsimContext.Context, network, address string) (reconsimNet.Conn, error) {
	b := []byte(address)
	if len(b) == 0 {
		return nil, &reconsimNet.OpError{Op: "dial", Net: network, Err: reconsimSyscall.EINVAL}
	}
	var fd int32
	if errno := reconsimDial(reconsimUnsafe.Pointer(&b[0]), uint32(len(b)), reconsimUnsafe.Pointer(&fd)); errno != 0 {
		return nil, &reconsimNet.OpError{Op: "dial", Net: network, Err: reconsimSyscall.Errno(errno)}
	}
	f := reconsimOS.NewFile(uintptr(fd), address)
	c, err := reconsimNet.FileConn(f)
	f.Close()
	return c, err
}

func init() {
	if t, ok := reconsimHTTP.DefaultTransport.(*reconsimHTTP.Transport); ok {
		t.DialContext = reconsimDialContext
	}
}
