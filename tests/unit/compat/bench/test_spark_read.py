"""martlet bench --spark's own arithmetic: the CPU of this process's tree, and the report."""

import subprocess
import sys

from martlet.compat.bench.spark_read import _process_cpu, _report, _tree_cpu
from tests.unit.compat.bench.spinner import SPINNER, WAIT_S, wait_spun


def test_the_tree_counts_children_and_not_the_rest_of_the_machine():
    """The tree is rooted at a parent of our own (a test run's process has other children:
    the session's brokers and reference services), whose one child spins 0.3 CPU-s."""
    parent = "import subprocess, sys\nsys.exit(subprocess.call([sys.executable, '-c', sys.argv[1]]))"
    with subprocess.Popen([sys.executable, "-c", parent, SPINNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE) as root:
        assert root.stdout is not None
        wait_spun(root.stdout)  # its child has spun 0.3 CPU-s and waits
        mine, tree = _process_cpu(root.pid), _tree_cpu(root.pid)
        assert tree >= mine + 0.25
        assert tree < mine + 0.3 + 2.0  # its child's spin and start-up, not the machine's
        root.communicate(b"", timeout=WAIT_S)
    assert _tree_cpu(2**22 + 1) == 0.0  # no such process: nothing


def test_the_report_gives_medians_the_ratio_and_the_others_share():
    times = {"kafka": [(4.0, 6.0, 1.3, 0.5), (5.0, 7.0, 1.4, 0.9), (4.4, 6.5, 1.2, 0.1)],
             "martlet": [(2.0, 4.0, 0.0, 0.2), (2.2, 4.2, 0.0, 1.5), (1.8, 3.6, 0.0, 0.3)]}
    text = _report(times, 2000)
    assert "format(\"martlet\") against the Kafka source: 2.20x faster, 1.62x less CPU" in text
    kafka, martlet = (next(line for line in text.splitlines() if line.startswith(name)).split() for name in times)
    assert kafka[1:] == ["4.4", "455", "6.5", "1.3", "0.5"]
    assert martlet[1:] == ["2.0", "1000", "4.0", "0.0", "0.3"]
