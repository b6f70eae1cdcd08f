"""Kubeflow training jobs (PyTorchJob, TFJob, MPIJob, ... of the training operator): every pod of
the job, whatever its replica type, is labelled with the job's name. The size (the replicas of all
replica types) is on the job only."""

from netsched.jobs.kinds import GangLabels

KUBEFLOW = GangLabels("KubeflowJob", ("training.kubeflow.org/job-name",))
