"""The workload kinds whose pods netsched gangs as they are: each declared in one file of this package
(a `netsched.jobs.kinds.kind.GangKind`), collected by `netsched.jobs.kinds.registry`."""
