"""What each DAG node is, in the words of a breakdown: compute, or communication of one parallelism (TP, CP, EP,
DP, PP).

A collective's flows and markers run on the stream of the parallelism that issued it (workload/program.py's
Stream: Megatron-Core gives TP, CP, EP and DP their own communicators); the distributed optimizer's and FSDP's
parameter all-gathers (Stream.param_comm) are data-parallel traffic; a flow outside every collective is a
pipeline send (dag.nodes.PIPELINE_SEND), and DualPipe's gradient all-reduce between the two ranks holding a stage
(workload.data_parallel.MIRROR_SYNC), which runs on the data-parallel stream, is pipeline traffic too: at dp 1 it
was reported as data-parallel communication, advised against with data-parallel remedies. The gantt and the trace
draw it on the pipeline stream's row for the same reason (shown_stream): the findings called it PP while both
pictures drew it as "dp-comm".
"""

from __future__ import annotations

import numpy as np

from ..dag.nodes import CollectiveInstance, ExecutionDAG, NodeKind
from ..workload.data_parallel import MIRROR_SYNC
from ..workload.program import Stream

COMM_KINDS = ("TP", "CP", "EP", "DP", "PP")
"""The kinds of communication a breakdown tells apart, in the order they are reported."""
COMPUTE = "compute"
KIND_NAMES = (COMPUTE, *COMM_KINDS)
"""Every node kind: index 0 is compute, then COMM_KINDS (index = 1 + its place there)."""
KIND_OF_STREAM = {Stream.compute: COMPUTE, Stream.tp_comm: "TP", Stream.pp_comm: "PP", Stream.dp_comm: "DP",
                  Stream.ep_comm: "EP", Stream.cp_comm: "CP", Stream.param_comm: "DP"}
"""The communication a stream carries."""


def shown_stream(collective: CollectiveInstance) -> Stream:
    """The stream whose communication a collective counts as, and on whose row the gantt and the trace draw it:
    its own, but the pipeline's for DualPipe's mirror all-reduce (MIRROR_SYNC), which runs on the data-parallel
    stream and is pipeline traffic."""
    return Stream.pp_comm if collective.label == MIRROR_SYNC else Stream(collective.stream)


def node_kinds(dag: ExecutionDAG) -> np.ndarray:
    """Per node: its index in KIND_NAMES. Compute kernels are compute; a collective's flows and markers the kind
    of its stream (DualPipe's mirror all-reduce PP); flows and markers outside every collective pipeline (PP)
    traffic."""
    by_stream = np.array([KIND_NAMES.index(KIND_OF_STREAM[s]) for s in Stream], dtype=np.int64)
    pipeline = KIND_NAMES.index("PP")
    of_coll = np.array([by_stream[shown_stream(c)] for c in dag.collectives] + [pipeline], dtype=np.int64)
    kinds = of_coll[dag.coll]  # coll -1 picks the trailing PP
    kinds[dag.kind == NodeKind.compute] = KIND_NAMES.index(COMPUTE)
    return kinds
