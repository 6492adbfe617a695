package mcp_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// containing returns a launcher on the strongest sandbox here, or skips
// when the sandbox that works here confines nothing.
func containing(t *testing.T, readOnly ...string) *mcp.SandboxLauncher {
	t.Helper()
	sb, err := sandbox.New(context.Background(), nil)
	if err != nil {
		t.Skipf("no sandbox works here: %v", err)
	}
	e := sb.Enforcement()
	if !e.Filesystem || e.Network != sandbox.NetworkDenied {
		t.Skipf("the %s sandbox does not confine writes and the network (%s)", sb.Name(), e.Gaps)
	}
	return &mcp.SandboxLauncher{Sandbox: sb, ReadOnly: append([]string{filepath.Dir(serverExe())}, readOnly...)}
}

// listener accepts on loopback and greets whoever connects.
func listener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from the host"))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestContained: a stdio server in the sandbox cannot write outside its
// workdir, nor dial a host the policy does not allow. The negative
// control runs the same server with host: true, where both succeed.
func TestContained(t *testing.T) {
	l := containing(t)
	addr := listener(t)
	outside := filepath.Join(t.TempDir(), "planted")
	for _, host := range []bool{false, true} {
		t.Run(fmt.Sprintf("host=%v", host), func(t *testing.T) {
			os.Remove(outside)
			rec := &recorder{}
			srv := fake("fk")
			srv.Host = host
			srv.CallTimeout = sandbox.Duration(10 * time.Second)
			c := connect(t, mcp.Options{Servers: []mcp.Server{srv}, Launcher: l, Observer: rec.observe})
			conn := rec.of(mcp.EventConnect)[0]
			if conn.Host != host || (conn.Backend == "host") != host || conn.Enforcement == nil {
				t.Errorf("connect event: %+v", conn)
			}
			w := call(t, find(t, c, "mcp__fk__write"), fmt.Sprintf(`{"path":%q,"content":"x"}`, outside))
			_, statErr := os.Stat(outside)
			d := call(t, find(t, c, "mcp__fk__dial"), fmt.Sprintf(`{"addr":%q}`, addr))
			if host {
				if w.IsError || statErr != nil {
					t.Errorf("control: the host server could not write %s: %+v", outside, w)
				}
				if d.IsError || !strings.Contains(d.Output, "hello from the host") {
					t.Errorf("control: the host server could not dial %s: %+v", addr, d)
				}
				return
			}
			if !w.IsError || statErr == nil {
				t.Errorf("the contained server wrote %s: %+v", outside, w)
			}
			if !d.IsError || strings.Contains(d.Output, "hello") {
				t.Errorf("the contained server dialled %s: %+v", addr, d)
			}
			// Its own workdir is writable.
			if r := call(t, find(t, c, "mcp__fk__write"), `{"path":"inside.txt","content":"x"}`); r.IsError {
				t.Errorf("the contained server could not write its workdir: %+v", r)
			}
		})
	}
}

// TestContainedFilesystem runs the real server-filesystem in the
// sandbox with a host directory it is told it may write: the sandbox
// still refuses, where the host (the control) does not.
func TestContainedFilesystem(t *testing.T) {
	js := npmPackage(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	node, _ := lookNode()
	l := containing(t, npmDir())
	// Under /var/tmp, which the sandbox shows read-only, so that the
	// server finds the directory it is given.
	victim, err := os.MkdirTemp("/var/tmp", "io-harness-mcp-victim-")
	if err != nil {
		t.Skipf("no /var/tmp: %v", err)
	}
	defer os.RemoveAll(victim)
	target := filepath.Join(victim, "planted")
	for _, host := range []bool{false, true} {
		t.Run(fmt.Sprintf("host=%v", host), func(t *testing.T) {
			os.Remove(target)
			srv := mcp.Server{Name: "files", Command: []string{node, js, victim}, Host: host,
				StartTimeout: sandbox.Duration(60 * time.Second), CallTimeout: sandbox.Duration(30 * time.Second)}
			c := connect(t, mcp.Options{Servers: []mcp.Server{srv}, Launcher: l})
			r := call(t, find(t, c, "mcp__files__write_file"), fmt.Sprintf(`{"path":%q,"content":"x"}`, target))
			_, statErr := os.Stat(target)
			switch {
			case host && (r.IsError || statErr != nil):
				t.Errorf("control: the host server could not write: %+v", r)
			case !host && (!r.IsError || statErr == nil):
				t.Errorf("the contained server wrote %s: %+v", target, r)
			}
		})
	}
}
