"""LeaderWorkerSets (leaderworkerset.x-k8s.io): each replica is a group of one leader and its
workers, labelled with the set's name and the group's index; every pod of the group carries the
group's size (leader included) as an annotation. One group is one gang."""

from netsched.jobs.kinds import GangLabels

PREFIX = "leaderworkerset.sigs.k8s.io/"
LEADER_WORKER_SET = GangLabels("LeaderWorkerSet", (PREFIX + "name", PREFIX + "group-index"),
                               size_annotation=PREFIX + "size")
