package faultnet

import (
	"bytes"

	"github.com/hashicorp/raft"
)

// A duplicate is delivered after the original call returned, but
// hashicorp/raft reuses a request object once its call returns (replicateTo
// refills the same AppendEntriesRequest for its next batch; heartbeat sends
// one request forever). A duplicate encoded later from the caller's pointer
// would be a torn mix of two batches and a data race. The fault transport
// therefore duplicates a deep copy taken when the original is sent: the
// copies below share no memory with their source (nil stays nil, so a copy
// compares equal to its source with reflect.DeepEqual).

func copyHeader(h raft.RPCHeader) raft.RPCHeader {
	h.ID, h.Addr = bytes.Clone(h.ID), bytes.Clone(h.Addr)
	return h
}

func copyLog(l *raft.Log) *raft.Log {
	if l == nil {
		return nil
	}
	c := *l
	c.Data, c.Extensions = bytes.Clone(l.Data), bytes.Clone(l.Extensions)
	return &c
}

func copyAppendEntries(r *raft.AppendEntriesRequest) *raft.AppendEntriesRequest {
	c := *r
	c.RPCHeader = copyHeader(r.RPCHeader)
	//lint:ignore SA1019 a copy holds every field the sender set, the legacy one too
	c.Leader = bytes.Clone(r.Leader)
	if r.Entries != nil {
		c.Entries = make([]*raft.Log, len(r.Entries))
		for i, e := range r.Entries {
			c.Entries[i] = copyLog(e)
		}
	}
	return &c
}

func copyRequestVote(r *raft.RequestVoteRequest) *raft.RequestVoteRequest {
	c := *r
	c.RPCHeader = copyHeader(r.RPCHeader)
	//lint:ignore SA1019 a copy holds every field the sender set, the legacy one too
	c.Candidate = bytes.Clone(r.Candidate)
	return &c
}

func copyPreVote(r *raft.RequestPreVoteRequest) *raft.RequestPreVoteRequest {
	c := *r
	c.RPCHeader = copyHeader(r.RPCHeader)
	return &c
}

func copyTimeoutNow(r *raft.TimeoutNowRequest) *raft.TimeoutNowRequest {
	c := *r
	c.RPCHeader = copyHeader(r.RPCHeader)
	return &c
}
