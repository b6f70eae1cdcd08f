"""The pod-gang controller: releases the gated pods of a Job, JobSet, ... gang whole when it fits."""
