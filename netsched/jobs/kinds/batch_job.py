"""batch/v1 Jobs: the Job controller labels each pod with its Job's name and makes the Job its
controller. A Job's size (spec.parallelism) is on the Job only, so the pods leave it unsaid."""

from netsched.jobs.kinds import GangLabels

BATCH_JOB = GangLabels("Job", ("batch.kubernetes.io/job-name",), owner=("batch/v1", "Job"))
