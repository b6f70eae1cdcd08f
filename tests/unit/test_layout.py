"""The test tree's own rule: `make test` collects unit, integration, faults and e2e in one pytest run
(rootdir imports, no packages), so two test files with one basename stop the whole run at collection."""

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_name_is_unique_across_the_suites():
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, n in names.items() if n > 1] == []
