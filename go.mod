module github.com/jobraft/jobraft

go 1.26

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/hashicorp/go-hclog v1.6.3
	github.com/hashicorp/go-metrics v0.5.4
	github.com/hashicorp/go-msgpack/v2 v2.1.2
	github.com/hashicorp/raft v1.7.3
	github.com/hashicorp/raft-boltdb/v2 v2.3.1
	github.com/robfig/cron/v3 v3.0.1
	github.com/tidwall/btree v1.8.2
	go.etcd.io/bbolt v1.5.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/armon/go-metrics v0.4.1 // indirect
	github.com/boltdb/bolt v1.3.1 // indirect
	github.com/fatih/color v1.13.0 // indirect
	github.com/hashicorp/go-immutable-radix v1.0.0 // indirect
	github.com/hashicorp/golang-lru v0.5.0 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.14 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/sys v0.45.0 // indirect
)
