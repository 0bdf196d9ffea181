package replicatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// Redis is a private redis-server process on a free loopback port.
type Redis struct {
	cmd  *exec.Cmd
	addr string
	out  *bytes.Buffer
	done chan struct{}
}

// StartRedis starts redis-server (from PATH) on a free port, without
// persistence, with any further server arguments (say "--requirepass",
// "pw"), and waits until it accepts connections (at most 10 s).
func StartRedis(args ...string) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found on PATH: install it (apt-get install redis-server)")
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Redis{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), out: &bytes.Buffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no"}, args...)...)
	r.cmd.Stdout = r.out
	r.cmd.Stderr = r.out
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.addr, time.Second)
		if err == nil {
			c.Close()
			return r, nil
		}
		select {
		case <-r.done:
			return nil, fmt.Errorf("redis-server exited: %s", r.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.Close()
			return nil, fmt.Errorf("redis-server did not accept connections on %s within 10s", r.addr)
		}
	}
}

// Addr is host:port.
func (r *Redis) Addr() string { return r.addr }

// URL is redis://host:port.
func (r *Redis) URL() string { return "redis://" + r.addr }

// Close stops the server and waits for it (at most 5 s, then kills it).
func (r *Redis) Close() {
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

func freePort() (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
