"""scheduler-plugins PodGroups (scheduling.x-k8s.io): the pods of a group carry the PodGroup's name
as a label; its minMember is on the PodGroup object only."""

from netsched.jobs.kinds import GangLabels

POD_GROUP = GangLabels("PodGroup", ("scheduling.x-k8s.io/pod-group",))
