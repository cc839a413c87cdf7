# jobraft — see README.md. Every target works on a machine with only Go and
# the module proxy.
GO        ?= go
PKGS      := ./...
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all smoke test unit fuzz lint tidy-check bench soak demo build clean jobd jobctl cluster chaos-bugs grow-demo netns-test netns-bench bench-scale

all: lint test

build:
	$(GO) build $(PKGS)

## jobd, jobctl: the example daemon and CLI into bin/ (examples is its
## own module, so they are built from there).
jobd:
	cd examples && $(GO) build -o ../bin/jobd ./jobd

jobctl:
	cd examples && $(GO) build -o ../bin/jobctl ./cmd/jobctl

## cluster: a local 3-member jobd cluster (mTLS) in .cluster/; stop it with
## examples/scripts/stop-cluster.sh .cluster
cluster: jobd jobctl
	JOBD=$(CURDIR)/bin/jobd JOBCTL=$(CURDIR)/bin/jobctl examples/scripts/start-cluster.sh .cluster

## smoke: a quick check, under a minute: the README's embedding example
## (and that its copy in the README is the file), a few of jobd's API
## tests against a real jobd, jobctl's help and usage.
smoke:
	cd examples && $(GO) test -count=1 -run 'TestEmbeddingExample|TestReadmeEmbedsTheExample|TestSubmitClaimAckAndStaleToken|TestRepliesGiveTextBesideBase64|TestListDeadAcrossQueues|TestJobctlHelpAndUsage' ./embed/ ./jobd/ ./cmd/jobctl/

## test: everything CI runs — all packages with the race detector (the
## crash tests included; the examples' include netns-test's, which need
## root and skip without it unless JOBRAFT_REQUIRE_NETNS=1, as .ci/run
## sets), then a short pass of every fuzz target.
test: unit fuzz

unit:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	$(GO) test -count=1 -timeout 5m -run 'TestCatchUpAddsMembersToALoadedCluster|NeverPromotedAndNamedStalled' . ./raft/
	cd examples && $(GO) test -race -count=1 -timeout 10m ./...
	cd bench && $(GO) test -count=1 -timeout 5m ./...
	cd bench/scale && $(GO) test -count=1 -timeout 5m ./...


## netns-test: members on separate hosts, as root (CI is): each jobd in its
## own network namespace and address, Toxiproxy on every link. The rig's
## tests (latency really applied, partitions really cut, bandwidth capped,
## resets, no namespace left behind, a dead rig's swept) and the black-box
## fault test at 2 ms round trip (resets, a bandwidth cap, a one-way cut,
## the leader isolated, frozen, killed; no acknowledged job lost, exactly
## once, convergence, walcompare). Without root they skip, saying why;
## JOBRAFT_REQUIRE_NETNS=1 makes that a failure.
NETNS_TESTS := TestLatencyIsApplied|TestPartitionCuts|TestBandwidthIsCapped|TestResetsEndConnections|TestCloseLeavesNoNamespace|TestSweepRemovesADeadRig|TestNetnsFaults
netns-test:
	cd examples && $(GO) test -count=1 -timeout 15m -run '^($(NETNS_TESTS))$$' ./internal/netrig/ ./cmd/demo/

## netns-bench: the timing table of docs/timing.md (as root): per round
## trip (0.2, 2, 20, 50 ms) with the default and the recommended timeouts,
## Submit and cycle rates and p99, failover with the leader killed,
## partitioned and frozen. NETNS_BENCH_FLAGS, e.g. '-rtt 2ms -n 3'.
NETNS_BENCH_FLAGS ?= -d 5s -n 5
netns-bench:
	cd examples && $(GO) run ./cmd/netbench $(NETNS_BENCH_FLAGS)

# Each fuzz target runs a fixed number of executions, not a duration: a
# duration races the Go 1.26 fuzz coordinator's shutdown on a loaded machine
# (go.dev/issue/75804, fixed in Go 1.27) and fails with "context deadline
# exceeded" and no crasher. Slow targets (each execution opens a log) get
# fewer. Longer runs: make fuzz FUZZ_EXECS=5000000.
FUZZ_EXECS      ?= 100000
FUZZ_SLOW_EXECS ?= 5000
FUZZ_SLOW       := FuzzOpen FuzzOpenAndReaderAgree

fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		pkg=./$$(dirname $$f); \
		for t in $$(grep -h -o '^func Fuzz[A-Za-z0-9_]*' $$f | sed 's/^func //'); do \
			n=$(FUZZ_EXECS); \
			case " $(FUZZ_SLOW) " in *" $$t "*) n=$(FUZZ_SLOW_EXECS);; esac; \
			echo "fuzz $$pkg $$t ($$n executions)"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $${n}x -fuzzminimizetime 10x $$pkg; \
		done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	cd examples && $(GO) vet ./... && $(STATICCHECK) ./...
	cd bench && $(GO) vet ./... && $(STATICCHECK) ./...
	cd bench/scale && $(GO) vet ./... && $(STATICCHECK) ./...
	@$(MAKE) --no-print-directory tidy-check

## tidy-check: every module's go.mod and go.sum are tidy (the examples
## and bench modules need `go mod tidy` whenever the root gains a
## dependency).
tidy-check:
	@for d in . examples bench bench/scale; do \
		(cd $$d && cp go.mod /tmp/jobraft-tidy.mod && cp go.sum /tmp/jobraft-tidy.sum && \
		$(GO) mod tidy && if ! cmp -s go.mod /tmp/jobraft-tidy.mod || ! cmp -s go.sum /tmp/jobraft-tidy.sum; then \
			echo "go.mod/go.sum of $$d not tidy: run 'cd $$d && go mod tidy'"; \
			cp /tmp/jobraft-tidy.mod go.mod; cp /tmp/jobraft-tidy.sum go.sum; exit 1; fi) || exit 1; \
	done

## bench: jobraft next to what a user would pick instead (bare
## hashicorp/raft + raft-boltdb/v2, NATS JetStream R3 work queues with
## fsync always), one table with the goals' ratios from one run (the
## bench/ module; BENCH_FLAGS, e.g. '-c 64 -d 10s -runs 5'; BENCH_FULL=1
## for the full matrix); then the packages' benchmarks.
ifdef BENCH_FULL
BENCH_FLAGS ?= -c 1,16,64,256 -d 5s -runs 5
else
BENCH_FLAGS ?= -c 1,64,256 -d 2s -runs 3
endif
bench:
	cd bench && $(GO) run . $(BENCH_FLAGS)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s -timeout 60m ./wal/segment/ ./snapshot/ ./walcompare/
	$(GO) test -run '^$$' -bench . -benchtime 3s -timeout 60m ./raft/ .
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 -benchtime 200000x -timeout 60m ./fsm/

## bench-scale: how the cost grows with the work (the bench/scale module;
## docs/bench.md, "Scale"): a backlog of each of SCALE_SIZES pending jobs
## preloaded into a fresh 3-member cluster, then Submit and cycle rates at
## C=64, claim p50/p99, heap per job, snapshot, restart, backup and
## restore, a new member's promotion under half load; then 10,000 queues
## and 100 kinds. Every figure next to the empty backlog's of the same
## run; the plot goes to docs/bench-scale.png. 10M needs about 20 GB.
SCALE_SIZES ?= 0,1e6,3e6,1e7
SCALE_FLAGS ?= -d 5s
bench-scale:
	cd bench/scale && $(GO) run . -sizes $(SCALE_SIZES) $(SCALE_FLAGS) -plot ../../docs/bench-scale.png

## soak: long randomized runs: thousands of crash rounds and model checks,
## the fault scenarios' long variants, the Controller's long kill rounds,
## two members added to a cluster holding 1M jobs (figures in its -v log),
## the netns fault test at 50 ms round trip with the timeouts
## docs/timing.md recommends for it (as root).
soak:
	$(GO) test -count=1 -timeout 120m -run 'TestGuardModel' ./wal/ -rapid.checks=20000
	$(GO) test -count=1 -timeout 120m -run 'TestCrash' ./wal/segment/ -crash.rounds=2000
	$(GO) test -race -count=1 -timeout 60m -run 'TestScenario' ./raft/ -raft.long
	$(GO) test -race -count=1 -timeout 60m -run 'TestFailover|TestLinearizable' ./internal/test/e2e/ -jobraft.long
	$(GO) test -race -count=1 -timeout 60m -run 'TestFailoverWithDefaults' .
	$(GO) test -count=1 -timeout 240m -run 'TestChaos$$' ./internal/test/chaos/ -chaos.seeds=$(CHAOS_SEEDS) -chaos.pictures=$(CURDIR)/.soak/chaos
	$(GO) test -count=1 -timeout 60m -v -run 'TestCatchUp' . -jobraft.long
	cd examples && $(GO) test -count=1 -timeout 60m -v -run 'TestNetnsFaults$$' ./cmd/demo/ -netns.rtt 50ms -netns.heartbeat $(NETNS_SOAK_HEARTBEAT) -netns.jobs 6000

NETNS_SOAK_HEARTBEAT ?= 750ms

## soak's chaos part: CHAOS_SEEDS seeds (make test runs the first 50);
## one line per seed, the table seeds × outcome × checker, a picture per
## seed and their index page under .soak/chaos/.
CHAOS_SEEDS ?= 1000

## chaos-bugs: proves the chaos checkers against deliberately injected bugs
## (internal/test/bugs, built only with -tags chaosbugs): fencing, exactly-once
## dedupe, the commit clamp, the guard floor armed with the clamp, and the
## guard floor alone (reached by a lying disk) must each be caught within
## 50 seeds; prints the seed and the checkers that caught each
## (docs/chaos.md, "Proving the checkers").
chaos-bugs:
	@mkdir -p .soak; status=0; \
	$(GO) test -tags chaosbugs -count=1 -timeout 60m -run 'TestInjectedBugs' ./internal/test/chaos/ -v > .soak/chaos-bugs.log 2>&1 || status=$$?; \
	grep -E '^(chaos bug|--- FAIL|FAIL|ok)' .soak/chaos-bugs.log; echo "full log: .soak/chaos-bugs.log"; exit $$status

clean:
	rm -rf bin .demo .cluster .soak

## demo: a 3-member jobd cluster on loopback (mTLS between members) doing
## real work, with the leader SIGKILLed midway; exits 0 only if every check
## holds. DEMO_FLAGS passes flags, e.g. DEMO_FLAGS='-jobs 10000'.
DEMO_FLAGS ?=
demo:
	cd examples && $(GO) run ./cmd/demo $(DEMO_FLAGS)

## grow-demo: the demo cluster grows from 3 to 5 members while it works
## (each new jobd started with -join, added with POST /v1/cluster/members,
## a progress line per member until the catch-up policy promotes it), then
## shrinks back (DELETE /v1/cluster/members/{id}); every demo check holds.
grow-demo:
	cd examples && $(GO) run ./cmd/demo -grow -kill=false -jobs 20000 $(DEMO_FLAGS)
