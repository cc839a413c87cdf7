package main

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jobraft/jobraft"
)

// GET /v1/cluster/backup: a consistent backup of the whole job state
// (jobraft.Controller.Backup: at a read barrier, verified before the first
// byte is sent), streamed as application/octet-stream in the backup
// package's format. An error before the first byte is a JSON error reply;
// an error after it cuts the connection, so the client never sees a clean
// end of a partial backup (and backup.Decode refuses one anyway).
//
// One backup at a time per member (each costs a copy of the state on disk
// and a rebuild): another request meanwhile is refused with 409
// backup_in_progress.
func (s *server) backup(w http.ResponseWriter, r *http.Request) error {
	if _, busy := backupsRunning.LoadOrStore(s, true); busy {
		return &clientError{code: http.StatusConflict, kind: "backup_in_progress",
			reason: "a backup is being taken on this member: wait for it, or ask another member"}
	}
	defer backupsRunning.Delete(s)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="jobraft-%s-%s.jrb"`, s.member, time.Now().UTC().Format("20060102T150405Z")))
	w.Header().Set("Cache-Control", "no-store")
	bw := &deadlineWriter{w: w, rc: http.NewResponseController(w)}
	m, err := s.ctl.Backup(r.Context(), bw, jobraft.BackupOptions{ClusterID: s.clusterID})
	if err != nil {
		if bw.n > 0 {
			s.log.Warn("backup cut short", "sent", bw.n, "error", err)
			panic(http.ErrAbortHandler)
		}
		w.Header().Del("Content-Disposition")
		return err
	}
	s.log.Info("backup sent", "index", m.Index, "jobs", m.Jobs, "bytes", bw.n, "digest", m.StateDigest)
	return nil
}

// backupsRunning holds the servers taking a backup now.
var backupsRunning sync.Map

// deadlineWriter gives each write writeTimeout: a client that stops
// reading is cut, one that keeps reading may take as long as it needs.
type deadlineWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	n  int64
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	n, err := d.w.Write(p)
	d.n += int64(n)
	return n, err
}
