package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jobraft/jobraft/backup"
	"github.com/jobraft/jobraft/walcompare"
)

// Stats returns job counts per queue and state.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := c.do(ctx, &call{method: "GET", path: "/v1/stats", out: &s})
	return s, err
}

// Status returns the status of the member at endpoint ("" for any):
// members lists every member unless selfOnly.
func (c *Client) Status(ctx context.Context, endpoint string, selfOnly bool) (ClusterStatus, error) {
	var s ClusterStatus
	path := "/v1/cluster/status"
	if selfOnly {
		path += "?members=0"
	}
	cl := &call{method: "GET", path: path, out: &s}
	if endpoint != "" {
		return s, c.attempt(ctx, strings.TrimRight(endpoint, "/"), cl)
	}
	return s, c.do(ctx, cl)
}

// Members returns the cluster's members with their status (from any
// member's view).
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	s, err := c.Status(ctx, "", false)
	return s.Members, err
}

// WalCompare runs the online log comparison (GET /v1/cluster/walcompare)
// over indexes [from, to] (0: from the start, to the end) and returns its
// report; CommittedCount must be 0.
func (c *Client) WalCompare(ctx context.Context, from, to uint64) (walcompare.Report, error) {
	var r walcompare.Report
	path := "/v1/cluster/walcompare"
	var q []string
	if from > 0 {
		q = append(q, "from="+strconv.FormatUint(from, 10))
	}
	if to > 0 {
		q = append(q, "to="+strconv.FormatUint(to, 10))
	}
	if len(q) > 0 {
		path += "?" + strings.Join(q, "&")
	}
	err := c.do(ctx, &call{method: "GET", path: path, out: &r, stream: true})
	return r, err
}

// Backup streams a consistent backup of the cluster's job state (GET
// /v1/cluster/backup) into w and returns the bytes written. A member that
// cannot be reached or is taking another backup is skipped for the next;
// nothing is retried once a byte was written: on error, discard what w
// holds.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	var last error
	for i, ep := range c.cfg.Endpoints {
		n, err := c.backupFrom(ctx, ep, w)
		var e *Error
		busy := errors.As(err, &e) && e.Code == "backup_in_progress"
		if err == nil || n > 0 || !(errors.Is(err, ErrUnavailable) || busy) || i == len(c.cfg.Endpoints)-1 {
			return n, err
		}
		last = err
	}
	return 0, last
}

func (c *Client) backupFrom(ctx context.Context, ep string, w io.Writer) (int64, error) {
	op := "GET /v1/cluster/backup"
	req, err := http.NewRequestWithContext(ctx, "GET", ep+"/v1/cluster/backup", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	resp, err := c.http.Do(req)
	if err != nil {
		e := transportError(ep, op, err)
		if errors.Is(e, ErrOutcomeUnknown) {
			e.class = ErrUnavailable // a backup changes nothing
		}
		return 0, e
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return 0, replyError(ep, op, resp.StatusCode, b)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, &Error{Endpoint: ep, Op: op, Err: fmt.Errorf("after %d bytes: %w", n, err), class: ErrUnavailable}
	}
	return n, nil
}

// BackupToFile writes a backup to path: to a temporary file beside it,
// fsynced, read back and verified whole (backup.Verify: header, manifest,
// size and SHA-256), then renamed into place. On any error path is not
// created.
func (c *Client) BackupToFile(ctx context.Context, path string) (*backup.Manifest, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, err = c.Backup(ctx, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	f, err := os.Open(tmp.Name())
	if err != nil {
		return nil, err
	}
	m, err := backup.Verify(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("jobd: the backup received does not verify: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return m, nil
}
