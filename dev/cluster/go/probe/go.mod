// The real node tier's test program (test/node/), assembled into a one-file image with crane.
module jr2.dev/cluster/probe

go 1.26.0
