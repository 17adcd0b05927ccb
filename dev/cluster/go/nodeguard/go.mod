// The real node's chained CNI plugin that closes the node to Sandbox pods; see main.go.
module jr2.dev/cluster/nodeguard

go 1.26.0
