"""GPU identity beside capability (netsched.models.gpu_identity): a flag per product seen enough."""

import json

import numpy as np
import pytest

from netsched.models.artifact import ArtifactError
from netsched.models.features import FEATURE_NAMES, INDEX
from netsched.models.gpu_identity import MIN_JOBS, PREFIX, GpuIdentity
from netsched.models.gpus import GPU_FEATURES, gpu_features
from netsched.models.predictor import Predictor
from netsched.testing.models import sim_rows
from netsched.training.dataset import write_dataset
from netsched.training.train import train

GPU = [INDEX[f] for f in GPU_FEATURES]


def rows_on(product: str, jobs: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X = np.full((jobs, len(FEATURE_NAMES)), np.nan)
    X[:, GPU] = [gpu_features(product)[f] for f in GPU_FEATURES]
    return X, np.arange(start, start + jobs).astype(str)


def test_a_product_with_enough_jobs_gets_a_flag_and_any_other_gpu_none():
    seen, few = rows_on("NVIDIA-L40S", MIN_JOBS), rows_on("Tesla-T4", MIN_JOBS - 1, start=1000)
    identity = GpuIdentity.fit(FEATURE_NAMES, np.vstack([seen[0], few[0]]), np.concatenate([seen[1], few[1]]))
    assert identity is not None and identity.columns == (PREFIX + "NVIDIA-L40S",)
    unseen = rows_on("NVIDIA-H200", 1)[0]
    unknown = np.full((1, len(FEATURE_NAMES)), np.nan)
    flags = identity.flags(np.vstack([seen[0][:1], few[0][:1], unseen, unknown]))
    assert flags.ravel().tolist() == [1.0, 0.0, 0.0, 0.0]  # the last three: capability numbers alone
    assert GpuIdentity.fit(FEATURE_NAMES, few[0], few[1]) is None


def test_identity_over_other_gpu_columns_is_refused():
    identity = GpuIdentity.fit(FEATURE_NAMES, *rows_on("NVIDIA-L40S", MIN_JOBS))
    assert identity is not None
    params = {**identity.params(), "gpu_features": ["gpu_tflops16"]}
    with pytest.raises(ValueError, match="GPU identity over \\['gpu_tflops16'\\]"):
        GpuIdentity.of_params(params, FEATURE_NAMES)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("identity")
    data = tmp / "sim.csv"
    write_dataset(data, sim_rows(jobs=60, seed=6))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("netsched.training.train.MODEL_KINDS", ("hist_gradient_boosting_plain",))
        return train([data], tmp, name="m", log=lambda *_: None)


def test_the_artifact_records_its_flags_and_serves_them_from_its_files(artifact):
    predictor = Predictor.load(artifact)
    flags = predictor.meta["gpu_identity"]
    assert flags and all(c.startswith(PREFIX) for c in flags)
    assert predictor.meta["features"] == list(FEATURE_NAMES)  # the flags come after, derived from these


def test_serving_files_with_other_flags_than_meta_records_are_refused(artifact):
    meta_path = artifact / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["gpu_identity"] = meta["gpu_identity"][:-1]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="records the GPU identity flags .*retrain the model"):
        Predictor.load(artifact)
