"""The GPUJob CRD's names every component agrees on: its group and version, its phases and the
status fields of its forecast. Its spec, read as the gang rules use it, is netsched.jobs.gpujob.
"""

from __future__ import annotations

from enum import StrEnum

GROUP, VERSION, PLURAL, KIND = "netsched.io", "v1alpha1", "gpujobs", "GPUJob"


class Phase(StrEnum):
    """status.phase of a GPUJob; each value is the string the CRD's status shows."""
    PENDING = "Pending"  # its gang waits at the gate for room
    BLOCKED = "Blocked"  # it cannot run until someone changes the job or the cluster; the reason says what
    SCHEDULING = "Scheduling"  # released; fewer than minAvailable replicas run yet
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


TERMINAL = (Phase.SUCCEEDED, Phase.FAILED)

# status fields of the forecast (netsched.operator.forecaster): start (and the running jobs whose end it
# waits for) while waiting, completion until done
PREDICTED_START, PREDICTED_AFTER = "predictedStartTime", "predictedAfter"
PREDICTED_FINISH = "predictedCompletionTime"
# the 80% interval around each predicted time: "<field>P10" and "<field>P90"
PREDICTED_START_RANGE = (PREDICTED_START + "P10", PREDICTED_START + "P90")
PREDICTED_FINISH_RANGE = (PREDICTED_FINISH + "P10", PREDICTED_FINISH + "P90")
PREDICTED_SECONDS, PREDICTION_BASIS = "predictedDurationSeconds", "predictionBasis"
# the first forecast, kept until the job ends (netsched.jobs.forecast_errors)
FIRST_FORECAST = "firstForecast"
