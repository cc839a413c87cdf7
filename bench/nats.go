package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsCluster: three embedded nats-server instances with JetStream,
// clustered over loopback routes, file storage with `sync_interval:
// always` (an fsync per write, as jobraft's log), and two work-queue
// streams replicated to all three (R3): "submit" and "cycle". Client c
// talks to server c%3.
type natsCluster struct {
	servers []*server.Server
	conns   []*nats.Conn
	js      []jetstream.JetStream
	cons    []jetstream.Consumer // the "cycle" work queue's consumer, per connection
}

// natsConfig is one server's configuration file.
func natsConfig(name, dir, client, route string, routes []string) string {
	var rs []string
	for _, r := range routes {
		rs = append(rs, fmt.Sprintf("%q", "nats-route://"+r))
	}
	return fmt.Sprintf(`server_name: %s
listen: %q
jetstream {
  store_dir: %q
  sync_interval: always
}
cluster {
  name: bench
  listen: %q
  routes: [%s]
}
`, name, client, dir, route, strings.Join(rs, ", "))
}

func startNATS(dir string, clients, routes []string) (*natsCluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &natsCluster{}
	for i := range clients {
		name := fmt.Sprint("n", i)
		path := filepath.Join(dir, name+".conf")
		conf := natsConfig(name, filepath.Join(dir, name), clients[i], routes[i], routes)
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			c.close()
			return nil, err
		}
		opts, err := server.ProcessConfigFile(path)
		if err != nil {
			c.close()
			return nil, err
		}
		if !opts.SyncAlways {
			c.close()
			return nil, errors.New("nats: sync_interval: always did not take effect")
		}
		opts.NoLog, opts.NoSigs = true, true
		s, err := server.NewServer(opts)
		if err != nil {
			c.close()
			return nil, err
		}
		c.servers = append(c.servers, s)
		go s.Start()
	}
	for _, s := range c.servers {
		if !s.ReadyForConnections(30 * time.Second) {
			c.close()
			return nil, errors.New("nats: a server is not ready for connections")
		}
	}
	if err := waitUntil(30*time.Second, func() bool {
		for _, s := range c.servers {
			if s.NumRoutes() < len(c.servers)-1 {
				return false
			}
		}
		return true
	}); err != nil {
		c.close()
		return nil, fmt.Errorf("nats: routes: %w", err)
	}
	if err := waitUntil(30*time.Second, func() bool {
		for _, s := range c.servers {
			if s.JetStreamIsLeader() {
				return true
			}
		}
		return false
	}); err != nil {
		c.close()
		return nil, fmt.Errorf("nats: no JetStream meta leader: %w", err)
	}
	for _, s := range c.servers {
		nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1))
		if err != nil {
			c.close()
			return nil, err
		}
		c.conns = append(c.conns, nc)
		js, err := jetstream.New(nc)
		if err != nil {
			c.close()
			return nil, err
		}
		c.js = append(c.js, js)
	}
	// Stream creation can be refused while the meta group settles: retry.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, name := range []string{"submit", "cycle"} {
		cfg := jetstream.StreamConfig{Name: strings.ToUpper(name), Subjects: []string{name}, Retention: jetstream.WorkQueuePolicy,
			Replicas: 3, Storage: jetstream.FileStorage}
		var last error
		if err := waitUntil(30*time.Second, func() bool {
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			defer acancel()
			_, last = c.js[0].CreateStream(actx, cfg)
			return last == nil
		}); err != nil {
			c.close()
			return nil, fmt.Errorf("nats: create stream %s: %w (last error: %v)", name, err, last)
		}
	}
	if _, err := c.js[0].CreateOrUpdateConsumer(ctx, "CYCLE", jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxAckPending: -1}); err != nil {
		c.close()
		return nil, fmt.Errorf("nats: consumer: %w", err)
	}
	for _, js := range c.js {
		cn, err := js.Consumer(ctx, "CYCLE", "workers")
		if err != nil {
			c.close()
			return nil, fmt.Errorf("nats: consumer: %w", err)
		}
		c.cons = append(c.cons, cn)
	}
	return c, nil
}

func (c *natsCluster) close() {
	for _, nc := range c.conns {
		nc.Close()
	}
	for _, s := range c.servers {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// submit: one publish, acknowledged once stored on a quorum.
func (c *natsCluster) submit(ctx context.Context, client int, payload []byte) error {
	_, err := c.js[client%len(c.js)].Publish(ctx, "submit", payload)
	return err
}

// cycle: publish, fetch one message of the shared work queue, ack it and
// wait for the server's confirmation (DoubleAck), so the ack is durable
// as jobraft's is.
func (c *natsCluster) cycle(ctx context.Context, client int, payload []byte) error {
	k := client % len(c.js)
	if _, err := c.js[k].Publish(ctx, "cycle", payload); err != nil {
		return err
	}
	for {
		batch, err := c.cons[k].Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		got := false
		for m := range batch.Messages() {
			got = true
			if err := m.DoubleAck(ctx); err != nil {
				return err
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if got {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
