// The real node's pod sandbox program (the "pause" container); see main.go.
module jr2.dev/cluster/pause

go 1.26.0
