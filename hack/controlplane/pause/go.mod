module github.com/netsched/netsched/hack/controlplane/pause

go 1.24.0
