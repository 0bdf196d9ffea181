//go:build objectstack

package objectstack

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// Redis is a private redis-server owned by one test, on a free loopback
// port, without persistence. It is killed when the test ends.
type Redis struct {
	t    testing.TB
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis starts a private redis-server and waits until it answers
// PING, failing the test saying how to get one when it cannot.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH: install Redis (apt-get install redis-server)")
	}
	r := &Redis{t: t, addr: proctest.FreeAddr(t), dir: t.TempDir()}
	t.Cleanup(r.kill)
	r.start(bin)
	return r
}

// URL returns redis://host:port for OS_REDIS_URL.
func (r *Redis) URL() string { return "redis://" + r.addr }

// Addr returns host:port.
func (r *Redis) Addr() string { return r.addr }

// Stop kills the server (the bus goes down until Start).
func (r *Redis) Stop() { r.kill() }

// Start starts the server again on the same port after Stop.
func (r *Redis) Start() {
	r.t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		r.t.Fatal(err)
	}
	r.start(bin)
}

func (r *Redis) start(bin string) {
	r.t.Helper()
	_, port, _ := net.SplitHostPort(r.addr)
	logf, err := os.OpenFile(filepath.Join(r.dir, "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	defer logf.Close()
	r.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", r.dir, "--protected-mode", "no")
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	err = poll(20*time.Second, 50*time.Millisecond, r.done, func() error {
		reply, err := r.Do("PING")
		if err == nil && reply != "PONG" {
			err = fmt.Errorf("PING answered %v", reply)
		}
		return err
	})
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
		r.t.Fatalf("redis-server on %s is not up: %v\n%s", r.addr, err, tail(string(log), 4000))
	}
}

func (r *Redis) kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
	}
	r.cmd = nil
}

// Do runs one command on a fresh connection and returns its reply: a
// string for simple and bulk strings, an int64, a []any for arrays, nil
// for a null, or an error for a Redis error reply.
func (r *Redis) Do(args ...string) (any, error) {
	c, err := net.DialTimeout("tcp", r.addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(encodeCommand(args)); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(c))
}

// Publish publishes message on channel and returns how many subscribers
// received it.
func (r *Redis) Publish(channel, message string) (int64, error) {
	v, err := r.Do("PUBLISH", channel, message)
	if err != nil {
		return 0, fmt.Errorf("publish on %s: %w", channel, err)
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("publish on %s: unexpected reply %v", channel, v)
	}
	return n, nil
}

// Message is one message received by a Subscription.
type Message struct {
	Pattern, Channel, Payload string
}

// Subscription receives the messages published on channels matching a
// pattern until Close.
type Subscription struct {
	conn net.Conn
	C    chan Message
	done chan struct{}
}

// PSubscribe subscribes to pattern (e.g. "os:ps:*") and delivers every
// message on the returned Subscription's channel C.
func (r *Redis) PSubscribe(pattern string) (*Subscription, error) {
	c, err := net.DialTimeout("tcp", r.addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(encodeCommand([]string{"PSUBSCRIBE", pattern})); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := readReply(br); err != nil { // the psubscribe confirmation
		c.Close()
		return nil, fmt.Errorf("psubscribe %s: %w", pattern, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	s := &Subscription{conn: c, C: make(chan Message, 1024), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.C)
		for {
			v, err := readReply(br)
			if err != nil {
				return
			}
			a, ok := v.([]any)
			if !ok || len(a) != 4 || a[0] != "pmessage" {
				continue
			}
			s.C <- Message{Pattern: a[1].(string), Channel: a[2].(string), Payload: a[3].(string)}
		}
	}()
	return s, nil
}

// Close ends the subscription and waits for its reader.
func (s *Subscription) Close() {
	_ = s.conn.Close()
	<-s.done
}

func encodeCommand(args []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return []byte(b.String())
}

func readReply(br *bufio.Reader) (any, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(br); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}
