"""Partition stage: which Relax ops run on the NPU, and why the others do not.

``table.py`` is the pattern table (rows of pattern + support check; producer chains in
``chains.py``, the integer rows in ``quantized_rows.py``); ``checks/`` holds the
support checks, each a named predicate returning a ``Verdict`` with a reason (``verdict.py``);
``pipeline.py`` is ``partition_for_npu``, the offload pass sequence; ``report.py`` collects what
was offloaded and why the rest stayed on the CPU.
"""

from .pipeline import PartitionError, partition_for_npu
from .report import PartitionReport, partition_with_report
from .verdict import Verdict

__all__ = [
    "PartitionError",
    "PartitionReport",
    "Verdict",
    "partition_for_npu",
    "partition_with_report",
]
