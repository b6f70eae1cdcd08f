"""JobSets (jobset.x-k8s.io): each replicated job runs `replicas` Jobs, and the JobSet controller
labels the pods of every one with the JobSet, the replicated job and the Job's index. One Job of a
replicated job is one gang, the unit JobSet itself places in one topology domain (its
exclusive-topology annotation); the gang's name is that Job's (`<jobset>-<replicated job>-<index>`)
and its size is the Job's parallelism, on the Job only."""

from netsched.jobs.kinds import GangLabels
from netsched.jobs.kinds.batch_job import JOBS

JOBSET = GangLabels("JobSet", ("jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
                               "jobset.sigs.k8s.io/job-index"), sized_by=JOBS)
