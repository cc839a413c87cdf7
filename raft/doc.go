// Package raft is a jobraft member: hashicorp/raft v1.7.3 over the guarded
// log (wal.Log, both LogStore and StableStore), the sealed snapshot store
// (snapshot.Store) and one multiplexed listener (transport.Mux), replicating
// any StateMachine. docs/node.md is the long form of this contract.
//
// # The caller's duties
//
//  1. Give every member a stable, unique Config.ID and its own DataDir.
//     Bootstrap a brand-new cluster on its initial members (the same
//     InitialMembers on each); a member started without Bootstrap and without
//     state waits to be added with AddMember.
//  2. Propose commands only through Node.Propose (or ProposeOnLeader): it
//     seals the leader's clock into the command and stamps the payload CRC.
//     Raw raft.Apply calls bypass the stamp and are refused by the log.
//  3. Treat a Propose error by its class: ErrRejected means nothing
//     happened (Propose already retried while ctx allowed); ErrIndeterminate
//     means the command may have been committed — retry it only if the
//     command is idempotent (carries its own key).
//  4. Read through LinearizableRead (then query the state machine) when a
//     read must see every write acknowledged before it began.
//  5. Close the node on shutdown; a crash needs nothing: the log recovers
//     on the next Open.
//  6. Pass Open no Option: options are this module's test instrumentation
//     (internal/test/nodeopt builds them).
//
// # Guarantees
//
//   - Every RPC the member receives passes the reconcile seam (package
//     raft/seam) before hashicorp/raft sees it: the corrections of the
//     rules hashicorp/raft bends (docs/upstream.md, U1-U13) are decided
//     there by pure functions of what the member reads (seam*.go, stale.go,
//     durable.go read and act; raft/seam decides).
//   - A nil Propose error: committed exactly once, applied on the leader.
//   - The log refuses, loudly and typed, anything that would break G1–G7
//     (see package wal); refusals are events (EventGuardRefusal).
//   - A follower whose cached last index went stale after a snapshot
//     install (hashicorp/raft #697 shape) recovers: see stale.go. While it
//     is stale, appends at that index and unsafe votes are refused and the
//     member does not campaign.
//   - A member whose log failed closed (wal.ErrFailed; Status.LogFailed)
//     does not campaign: it could win and never append (docs/node.md).
//   - A snapshot older than what the member committed never restores
//     (Figure 13 step 6, seam_install.go): the state machine, the applied
//     index and the committed log never go back.
//   - A member asked by a higher-term leader to cut entries at or below its
//     commit floor, or sent a snapshot that contradicts an entry it
//     committed (seam_install.go), is diverged: Status.Diverged, one EventDiverged, the
//     gauge jobraft.raft.diverged; it keeps refusing, stands for no
//     election and installs no snapshot until it is re-seeded (diverged.go,
//     docs/node.md "A diverged member").
//   - Without a quorum nothing waits for ever: Propose's retries, a
//     LinearizableRead's read index and AddMember's and RemoveMember's
//     wait for a leader end within Config.LeaderWait, with ErrNoLeader and
//     a *NoLeaderError saying how many voters this member reaches.
//   - With a Config.ClusterID, a join is checked on both sides: the leader
//     adds no member of another cluster, and a member waiting to be added
//     takes no append from a leader of another cluster (ErrClusterMismatch,
//     naming both IDs).
//   - A removed member learns it (its own committed configuration, or its
//     peers' leader's, no longer names it): Status.Removed, one
//     EventRemoved. Close it then.
//   - Status (and StatusOf over the RPC) reports term, leader, first/last/
//     commit/applied index, commit floor, digest and members; nothing in the
//     project infers state from log text.
//
// # Caveats
//
//   - Member identity comes from the certificates: under TLS a peer speaks
//     only as the member its certificate names (transport.MemberURI);
//     without TLS (loopback, or Config.AllowInsecure) anything that reaches
//     the port is taken for the member it claims to be.
//   - AddMember adds a non-voter and leaves its promotion to the leader's
//     catch-up policy (package catchup, docs/catchup.md); a member the
//     policy names stalled or diverged stays a non-voter until it is
//     removed or added again.
package raft
