"""What each event is: Kineto's category names across trace generations, and
the event names that mean "waiting for input" or "waiting for the device".

Category names changed three times between 2021 and 2024 (``Operator`` →
``cpu_op``, ``Runtime`` → ``cuda_runtime``, ``Kernel`` → ``kernel``, flows
``async`` → ``async_cpu_to_gpu`` → ``ac2g``); every generation maps onto one
:class:`Kind` here so nothing downstream has to know.
"""

from __future__ import annotations

import re
from enum import IntEnum

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.trace.name_match import pattern_needles


class Kind(IntEnum):
    """The role of a complete (``ph: X``) event."""

    CPU_OP = 1  # an ATen / autograd operator call
    USER_ANNOTATION = 2  # record_function labels, ProfilerStep#N, DataLoader iteration
    RUNTIME = 3  # CUDA/HIP runtime API call on the host (cudaLaunchKernel, cudaMemcpyAsync…)
    DRIVER = 4  # CUDA driver API call on the host (cuLaunchKernel, used by Triton)
    PYTHON = 5  # python_function frames (with_stack=True, 2022+)
    KERNEL = 6  # a kernel on the device (or a CUPTI range in counter mode)
    MEMCPY = 7  # a copy executed by the device
    MEMSET = 8  # a memset executed by the device
    GPU_ANNOTATION = 9  # gpu_user_annotation: the device-side twin of a user annotation
    GPU_SYNC = 10  # cuda_sync: the device waiting on an event/stream (not work)
    TRACE = 11  # the profiler's own span ("PyTorch Profiler (0)")
    OVERHEAD = 12  # profiler overhead recorded on the host ("Buffer Flush")
    OTHER = 13  # anything else: kept, never counted as work


HOST_KINDS = frozenset(
    {Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME, Kind.DRIVER, Kind.PYTHON, Kind.OVERHEAD,
     Kind.OTHER}
)
DEVICE_KINDS = frozenset(
    {Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.GPU_ANNOTATION, Kind.GPU_SYNC}
)
#: Device events that are real work and make the device busy.
DEVICE_ACTIVITY_KINDS = frozenset({Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET})
#: Host events a runtime/driver correlation id can point from.
LAUNCHER_KINDS = frozenset({Kind.RUNTIME, Kind.DRIVER})

CATEGORY_KIND: dict[str | None, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "Operator": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "cuda_runtime": Kind.RUNTIME,
    "Runtime": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "python_function": Kind.PYTHON,
    "kernel": Kind.KERNEL,
    "Kernel": Kind.KERNEL,
    "cuda_profiler_range": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "Memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "Memset": Kind.MEMSET,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "cuda_sync": Kind.GPU_SYNC,
    "Trace": Kind.TRACE,
    "overhead": Kind.OVERHEAD,
    "Overhead": Kind.OVERHEAD,
}

#: Flow categories that link a launch on the host to its device activity.
LAUNCH_FLOW_CATEGORIES = frozenset({"ac2g", "async", "async_cpu_to_gpu", "async_gpu"})

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")

#: Host events during which the process is fetching the next batch.
INPUT_NAME = re.compile(
    r"^enumerate\(DataLoader\)"
    r"|torch/utils/data/dataloader\.py\(\d+\): (?:__next__|_next_data)$"
)

#: Host events that block until the device has caught up (the user's or the profiler's).
SYNC_NAME = re.compile(
    r"^(?:cuda|hip)(?:Device|Stream|Event)Synchronize$"
    r"|^(?:cuda|hip)Memcpy(?:2D|3D|WithStream)?$"
    r"|^cuCtxSynchronize$|^cuStreamSynchronize$|^cuEventSynchronize$"
    r"|^aten::(?:item|_local_scalar_dense)$"
    r"|^torch/cuda/__init__\.py\(\d+\): synchronize$"
    r"|^<built-in function _cuda_synchronize>$"
)

#: Host events of a collective (c10d / ProcessGroup ops in today's naming, the backend's
#: own ``nccl:*`` / ``gloo:*`` ranges, ``record_param_comms``): while one runs the host is
#: blocked in communication (gloo does the work on the host; NCCL enqueues and may wait).
COMM_NAME = re.compile(r"^record_param_comms$|^c10d::|^nccl:|^gloo:")

#: Device kernels that are communication, not compute: they wait on other ranks.
COMM_KERNEL = re.compile(
    r"^(?:nccl|rccl)(?:Dev)?Kernel"
    # PyTorch's symmetric-memory collectives and vLLM's custom all-reduce wait on peers too.
    r"|multimem_(?:all_reduce|all_gather|reduce_scatter)"
    r"|(?:one|two)_shot_all_reduce|cross_device_reduce", re.I)

#: Host ops that are collectives: what they launch is communication too (a flatten copy
#: inside ``c10d::allgather_``, a reduce inside ``symm_mem::one_shot_all_reduce``).
COLLECTIVE_OP = re.compile(
    r"^record_param_comms$|^c10d(?:_functional)?::|^_c10d_functional::|^nccl:|^gloo:"
    r"|^symm_mem::\w*(?:all_reduce|all_gather|reduce_scatter|all_to_all|broadcast)"
    r"|^vllm::\w*all_reduce|^_C_custom_ar::")

#: A device→host copy into pageable memory: the launching call blocks until it is done.
PAGEABLE_DTOH = re.compile(r"DtoH \(Device -> Pageable\)")
#: A host→device copy from pageable memory: its ``cudaMemcpyAsync`` blocks while the driver
#: stages the data (``pageable-memcpy``; the ``syncs`` what-if makes it from pinned memory).
PAGEABLE_HTOD = re.compile(r"^Memcpy HtoD \(Pageable -> Device\)")


def kind_of(category: str | None) -> Kind:
    """Map a Kineto category (any generation) to a :class:`Kind`."""
    return CATEGORY_KIND.get(category, Kind.OTHER)


class KindOfCategory(dict):
    """Category → :func:`kind_of` value as an int, a category looked up for the first time
    added on the way: a batch's categories are looked up by a dict's own ``__getitem__``
    mapped at C speed, with no pass to find the new ones first."""

    def __missing__(self, category: str) -> int:
        kind = self[category] = int(kind_of(category))
        return kind


#: Ops whose scalar arguments (``Concrete Inputs``: stride, padding, dim, dtype,
#: is_causal…) the cost model reads. The model keeps that argument for these ops only: it
#: is a large part of every op event's text, and nothing else reads it.
_CONCRETE_READERS = re.compile(
    r"conv|attention"
    r"|^aten::(sum|mean|amax|amin|max|min|argmax|argmin|prod|logsumexp|var|std|var_mean"
    r"|std_mean|all|any|nansum|norm|linalg_vector_norm|_to_copy|index_select"
    r"|embedding_dense_backward|_scaled_mm)$"
    # Custom attention and GEMM ops (analysis.cost.custom_ops / custom_gemm).
    r"|^flash_attn(_3)?::|^FlashAttn|^xformers(_flash3?)?::|^flashinfer::|^tex_ts::te_gemm"
    r"|^_C::rotary_embedding$")


def keeps_concrete_inputs(name: str) -> bool:
    return _CONCRETE_READERS.search(name) is not None


def concrete_input_mask(names: list[str]) -> np.ndarray:
    """:func:`keeps_concrete_inputs` of each name (a span of 10⁶ steps brings 10⁶ new
    step names)."""
    return search_mask(_CONCRETE_READERS, names)


def search_mask(pattern: re.Pattern[str], strings: list[str]) -> np.ndarray:
    """Per string, whether ``pattern.search`` finds it. Where every match contains one of
    a few literals (:func:`~tb_diagnostics.trace.name_match.pattern_needles`), those are
    looked for in the strings joined by newlines (none holds one), and only the strings
    they fall in are searched: a step name holds none, and a ``search`` call per name cost
    0.7 s on a span of 10⁶ steps."""
    n = len(strings)
    out = np.zeros(n, dtype=bool)
    found = pattern_needles(pattern) if n > 1 else None
    if not found or pattern.flags & (re.IGNORECASE | re.ASCII):
        out[:] = np.fromiter(map(bool, map(pattern.search, strings)), dtype=bool, count=n)
        return out
    text = "\n".join(strings)
    at = [np.fromiter((m.start() for m in re.finditer(re.escape(needle), text)),
                      dtype=np.int64) for needle in found if needle in text]
    if not at:
        return out
    sizes = np.fromiter(map(len, strings), dtype=np.int64, count=n) + 1
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    # The string each occurrence lies in: the last one starting at or before it.
    cand = sorted_sets.unique(np.searchsorted(starts, np.concatenate(at), side="right") - 1)
    out[cand] = np.fromiter(map(bool, map(pattern.search, map(strings.__getitem__,
                                                               cand.tolist()))),
                            dtype=bool, count=cand.size)
    return out


#: A CUDA/HIP graph replay: one call launches every kernel of the graph (they share its
#: correlation id), so those kernels have no launch call of their own.
GRAPH_LAUNCH = re.compile(r"^(cuda|hip)GraphLaunch")


def is_amd_device(props: dict) -> bool:
    """Whether a ``deviceProperties`` entry is an AMD GPU: ROCm's carry ``gcnArchName``,
    and AMD names its parts AMD, Radeon or Instinct."""
    name = str(props.get("name", ""))
    return "gcnArchName" in props or any(w in name for w in ("AMD", "Radeon", "Instinct"))
