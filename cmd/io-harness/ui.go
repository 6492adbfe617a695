package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
	"github.com/initorigin/io-harness-go/pkg/harness/traceview"
)

const uiUsage = `Usage: io-harness ui [--store PATH] [--addr 127.0.0.1:PORT]

Serves every run of the store as pages on a loopback port, reading only:
an index of the runs, and for each run the page io-harness trace --html
writes, which follows the store while the run (or any run below it)
progresses. It prints the address and serves until Ctrl-C. It listens on
the loopback interface only and answers only requests addressed to it.`

func (e *env) uiCmd(args []string) int {
	fs := e.flags("ui", uiUsage)
	storePath := fs.String("store", defaultStore, "the SQLite store that records the runs")
	addr := fs.String("addr", "127.0.0.1:0", "the loopback `ADDRESS` to listen on (port 0: any free port)")
	pos, _, code, ok := e.parse(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return usageError(fs, "ui takes no arguments")
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return usageError(fs, "--addr: %v", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageError(fs, "--addr: %s is not a loopback address; the pages show everything the store holds", host)
	}
	if _, err := os.Stat(*storePath); err != nil {
		return e.fail("open the store", fmt.Errorf("%w (choose the store with --store PATH)", err))
	}
	st, err := sqlite.OpenReadOnly(e.ctx, *storePath)
	if err != nil {
		return e.fail("open the store "+*storePath, err)
	}
	defer st.Close()
	srv, err := traceview.NewServer(st)
	if err != nil {
		return e.fail("ui", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return e.fail("listen on "+*addr, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(e.stdout, "serving %s at http://%s/ (Ctrl-C stops)\n", *storePath, ln.Addr())
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			return e.fail("serve", err)
		}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
		<-done
	}
	return exitOK
}
