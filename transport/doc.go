// Package transport is jobraft's network layer: one TCP listener per member
// (a Mux) that carries both hashicorp/raft traffic and a small framed RPC
// layer (forwarded proposals, read-index reads, status), optionally under
// mutual TLS. The fault injector for tests (drops, delays, duplicates,
// partitions, one-way cuts, flapping links) is the separate package
// transport/faultnet, which wraps what this package hands out.
//
// # Basics
//
// The caller (the node) does, in order:
//
//  1. mux, err := transport.Listen(cfg). A nil cfg.TLS on a non-loopback
//     BindAddr fails with ErrInsecureBind unless cfg.AllowInsecure is set.
//     With cfg.TLS, every connection in both directions is mutual TLS: one
//     certificate is used as server and client, peers are verified against the
//     cluster CA (RootCAs/ClientCAs), client certificates are required, and
//     every certificate names exactly one member (MemberURI); cfg.ID, when
//     set, must be the member the own certificate names.
//  2. Register RPC handlers with mux.Handle(method, h) (before peers call;
//     until then they get a RemoteError coded CodeUnknownMethod).
//  3. nt, err := mux.RaftTransport(opts) and give mux.BindTargets(nt) (or,
//     in chaos tests, a wrapper of it such as faultnet's Wrap) to
//     raft.NewRaft. Pre-vote stays on: the NetworkTransport and the wrappers
//     implement raft.WithPreVote. Under TLS a raft transport without
//     BindTargets cannot dial (ErrUnboundTarget).
//  4. Call other members with mux.Call(ctx, addr, method, req) — or through a
//     transport.Caller, so chaos tests can pass a wrapped one.
//  5. On shutdown: mux.QuiesceRaft(ctx) while raft still runs (inbound
//     raft requests in flight are answered, the rest end quietly; without
//     it hashicorp/raft logs errors for requests that arrive after its own
//     shutdown), then raft.Shutdown (it closes the raft transport), then
//     mux.Close.
//
// # Guarantees
//
//   - One port: a connection starts with a 4-byte channel header (after the TLS
//     handshake) selecting raft or RPC; the server acknowledges it with the
//     same 4 bytes. Anything else closes that connection, logged with its
//     reason; the member keeps serving others.
//   - RPC frames are length-prefixed, CRC32C-checked and bounded by
//     MaxFrameSize; garbage, truncated (FrameTimeout), corrupt or oversized
//     frames close that connection with a logged reason. Logs carry lengths
//     and reasons, never payload bytes.
//   - Calls to one peer share one connection, multiplexed by request id, so a
//     slow handler does not block other calls. The caller's remaining time
//     travels with the request and bounds the handler's context.
//   - Every Call error is exactly one of three classes (see Caller):
//     ErrNotDelivered (the handler did not run: retry is safe),
//     ErrIndeterminate (written, no reply: it may have run), or *RemoteError
//     (a definite answer; HandlerRan is false only for the transport's own
//     refusals). IsNotDelivered covers both "did not run" cases. This is what
//     lets the node report "rejected, nothing happened" versus
//     "indeterminate, may have committed".
//   - With TLS, a peer speaks only as the member its certificate names: an
//     inbound raft request whose RPCHeader claims another member (or an
//     address on a host the certificate does not name) closes its
//     connection before raft sees it; a raft dial verifies the server is
//     the member raft sends to; a Call verifies the member of ExpectPeer;
//     handlers read the caller with PeerID. Refusals are counted
//     (IdentityStats) and logged without payload bytes.
//   - Close closes every connection before canceling handler contexts, so
//     callers of a closing member see ErrIndeterminate, not a spurious remote
//     error.
//
// # Caveats
//
//   - All members must use the same MaxFrameSize: a reply larger than the
//     caller's limit closes the connection (ErrIndeterminate).
//   - A frame write in progress is bounded by FrameTimeout and the context
//     deadline, not by cancellation alone.
//   - A peer whose connection stays silent after a call timed out is
//     presumed dead and redialed on the next call.
//   - Loopback detection is literal: hostnames other than "localhost" count as
//     non-loopback.
package transport
