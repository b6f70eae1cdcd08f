// Command pause is the pod sandbox's process for the dev-cluster's real node: as PID 1 of
// the pod it holds the namespaces, reaps orphans and exits on SIGINT or SIGTERM. A stand-in
// for registry.k8s.io/pause where no registry is reachable; static, stdlib only.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
