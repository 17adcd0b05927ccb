module jr2.dev/effector/confine

go 1.26.0

require (
	github.com/landlock-lsm/go-landlock v0.11.2
	golang.org/x/sys v0.50.0
)

require kernel.org/pub/linux/libs/security/libcap/psx v1.2.78 // indirect
