package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/objectstack-fleet/reconciler/internal/redact"
)

// Bus is the platform's pub/sub bus as the Driver uses it: channels are
// full names (prefix included).
type Bus interface {
	// Publish sends one message.
	Publish(ctx context.Context, channel string, msg []byte) error
	// Subscribe calls fn for every message on channels until ctx ends,
	// reconnecting by itself; it returns nil when ctx ends. ready, if not
	// nil, is called each time the subscription is (re)established.
	Subscribe(ctx context.Context, channels []string, ready func(), fn func(channel string, msg []byte)) error
}

// RedisBus is a Bus on a Redis server, as the platform's Redis cluster
// driver uses it.
type RedisBus struct {
	client *redis.Client
	addr   string // redacted, for errors
}

// busTimeout bounds one PUBLISH (and each dial).
const busTimeout = 5 * time.Second

// NewRedisBus returns a bus on the server at rawURL (redis:// or
// rediss://). It does no I/O.
func NewRedisBus(rawURL string) (*RedisBus, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		// A *url.Error quotes the URL, password included: keep its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("parse bus url %s: %w", redact.URL(rawURL), err)
	}
	opts.DialTimeout = busTimeout
	opts.ReadTimeout = busTimeout
	opts.WriteTimeout = busTimeout
	opts.MaxRetries = 1
	opts.DisableIdentity = true
	return &RedisBus{client: redis.NewClient(opts), addr: redact.URL(rawURL)}, nil
}

// Publish sends msg on channel.
func (b *RedisBus) Publish(ctx context.Context, channel string, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	if err := b.client.Publish(ctx, channel, msg).Err(); err != nil {
		return fmt.Errorf("publish on %s at %s: %w", channel, b.addr, err)
	}
	return nil
}

// Subscribe receives the messages of channels until ctx ends.
func (b *RedisBus) Subscribe(ctx context.Context, channels []string, ready func(), fn func(channel string, msg []byte)) error {
	ps := b.client.Subscribe(ctx, channels...)
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(10*time.Second), redis.WithChannelSendTimeout(time.Second))
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-ch:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("bus subscription closed")
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" && ready != nil {
					ready()
				}
			case *redis.Message:
				fn(m.Channel, []byte(m.Payload))
			}
		}
	}
}

// Close closes the connections.
func (b *RedisBus) Close() error { return b.client.Close() }

// RouteRedisLogs sends the Redis client's own log lines (connection pool
// retries and the like, otherwise printed raw on stderr) to log at debug
// level, as structured lines: the Driver reports each bus failure itself,
// once. The client's logger is process-wide (go-redis has no other), so
// the last call wins.
func RouteRedisLogs(log *slog.Logger) {
	redis.SetLogger(redisLogger{log})
}

type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "bus client", slog.String("message", strings.TrimSpace(fmt.Sprintf(format, v...))))
}
