"""`make demo` uses Kueue only when hack/kueue/build.sh has built it already: kueue_cached finds the
directory that script writes, by the marker it writes last, and never builds."""

from netsched.devcluster.binaries import controlplane_dir, kueue_cached, read_versions


def test_kueue_is_cached_only_once_its_build_completed(tmp_path, monkeypatch):
    monkeypatch.setenv("NETSCHED_CACHE", str(tmp_path))
    version = read_versions(controlplane_dir().parent / "kueue")["KUEUE_VERSION"]
    built = tmp_path / "bin" / f"kueue-{version}"
    assert kueue_cached() is None
    built.mkdir(parents=True)
    assert kueue_cached() is None  # a build under way, or one that failed
    (built / ".complete").touch()
    assert kueue_cached() == built
