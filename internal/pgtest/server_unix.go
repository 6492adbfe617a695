//go:build unix

package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Binaries returns the directory of initdb and postgres: the one on PATH,
// else the newest of Debian's /usr/lib/postgresql/*/bin.
func Binaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("initdb and postgres are not installed (Debian: apt-get install postgresql; make deps does it)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func (s *Server) boot() error {
	bin, err := Binaries()
	if err != nil {
		return err
	}
	sweepStale()
	dir, err := os.MkdirTemp("", "io-harness-pg-")
	if err != nil {
		return err
	}
	s.dir = dir
	asRoot := os.Geteuid() == 0
	if asRoot {
		if err := os.Chown(dir, nobody, nobody); err != nil {
			return fmt.Errorf("hand the cluster directory to nobody: %w", err)
		}
	}
	s.pw = randHex(12)
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(s.pw+"\n"), 0o600); err != nil {
		return err
	}
	if asRoot {
		os.Chown(pwfile, nobody, nobody)
	}
	data := filepath.Join(dir, "data")
	initdb := command(asRoot, filepath.Join(bin, "initdb"), "-D", data, "-U", "ioh", "--pwfile="+pwfile,
		"--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		s.cleanup()
		return fmt.Errorf("initdb: %v: %s", err, lastLines(string(out), 5))
	}
	os.Remove(pwfile)
	var last error
	for range 5 {
		if last = s.launch(bin, data, asRoot); last == nil {
			return nil
		}
	}
	s.cleanup()
	return last
}

// launch starts the server on a free loopback port and waits until it
// accepts connections.
func (s *Server) launch(bin, data string, asRoot bool) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	cmd := command(asRoot, filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-k", s.dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300",
		"-c", "shared_buffers=32MB", "-c", "log_min_messages=warning")
	cmd.Dir = s.dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.exited = make(chan struct{})
	ready := make(chan struct{})
	var logMu sync.Mutex
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			if log.Len() < 1<<16 {
				log.WriteString(line + "\n")
			}
			logMu.Unlock()
			if strings.Contains(line, "ready to accept connections") {
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() {
		cmd.Wait()
		close(s.exited)
	}()
	select {
	case <-ready:
	case <-s.exited:
		logMu.Lock()
		defer logMu.Unlock()
		return fmt.Errorf("postgres exited: %s", lastLines(log.String(), 5))
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-s.exited
		return errors.New("postgres did not start within 2 minutes")
	}
	s.cmd = cmd
	s.admin = fmt.Sprintf("postgres://ioh:%s@127.0.0.1:%d/postgres?sslmode=disable", s.pw, port)
	// The log line comes before the first connection is served: wait for
	// one to succeed.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if err := s.exec(ctx, "SELECT 1"); err == nil {
			return nil
		} else if ctx.Err() != nil {
			return fmt.Errorf("postgres does not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// command runs name as nobody when the tests run as root, and kills it
// when the test binary dies.
func command(asRoot bool, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"}
	attr := &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(attr)
	if asRoot {
		attr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: false}
	}
	cmd.SysProcAttr = attr
	return cmd
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Stop stops the server, if it runs, and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil {
		// SIGQUIT is the immediate shutdown: the cluster is thrown away.
		s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
		s.cmd = nil
	}
	s.cleanup()
}

func (s *Server) cleanup() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// sweepStale removes the clusters of test binaries that were killed before
// they could stop their server: a directory whose postmaster is gone, or
// that never got one and is an hour old. A live server's is left alone.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "io-harness-pg-*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
		if err != nil {
			if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.RemoveAll(dir)
			}
			continue
		}
		first, _, _ := strings.Cut(string(data), "\n")
		pid, err := strconv.Atoi(strings.TrimSpace(first))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}
