package cluster

import "time"

// StartSpare starts spare i with -join for the cluster clusterID (GET
// /v1/cluster/members gives it); it waits to be added.
func (c *Cluster) StartSpare(i int, clusterID string) error {
	m := c.Spares[i]
	m.join = clusterID
	return c.start(m)
}

// StopSpare SIGTERMs spare i and waits for a clean exit.
func (c *Cluster) StopSpare(i int, timeout time.Duration) error {
	return c.Spares[i].proc.Stop(timeout)
}
