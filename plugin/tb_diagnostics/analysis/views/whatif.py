"""What would a fix save? Each change replayed (:mod:`..replay`), and all of them together.

A projection is the span's windows replayed with one change: their walls before and
after. **One definition of a saving**, for the what-if cards and the findings alike: the
change replayed over every window; each window's saving is its wall before minus after,
signed; over the warm windows asked for, ``saves_us_total`` is their sum and ``saves_us``
that sum over their number, both never below zero (:func:`saving_over`). A step that
finishes sooner only to wait longer in the next (the DataLoader's batch is no sooner)
gives back what it saved: the span saves nothing, and the cards say the saving moves
(:attr:`Saving.moves`). The cards draw the warm step whose own saving is nearest the
per-step one (:attr:`Saving.shown`), named, never a step unlike the figure beside it.

A card's windows are the span's warm ones (:func:`warm_windows`; cold steps pay one-time
costs no fix removes). A finding's are the warm ones among its steps
(:func:`part_windows`). A finding whose change *is* its card's change (``Card.claims``)
gives the card's number; a finding whose change is *part* of it (``Card.parts``: one
sync site of the ``syncs`` card) gives its own change's figure, and the card lists it as
a part with the same figure. Parts do not add up to the card (removing one sync leaves
the host waiting at the next), nor do cards add up to ``all``. Rules that name the
problem a change fixes but have no change of their own to replay are ``Card.related``:
they claim no number.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tb_diagnostics import sorted_sets
from tb_diagnostics.analysis.replay.changes import (
    ASSUMES,
    amp_change,
    combine,
    fusion_change,
    graphs_change,
    input_change,
    launch_change,
    pinned_change,
    profiler_change,
    sync_change,
)
from tb_diagnostics.analysis.replay.compile_change import ASSUMES as COMPILE_ASSUMES
from tb_diagnostics.analysis.replay.compile_change import compile_change, compile_graphs_change
from tb_diagnostics.analysis.replay.engine import Change, replay_wall_us, same_change
from tb_diagnostics.analysis.replay.restrict import within_windows
from tb_diagnostics.analysis.span import SpanAnalysis, computed
from tb_diagnostics.analysis.views.artefacts import profiler_artefacts
from tb_diagnostics.analysis.views.warmth import step_walls
from tb_diagnostics.trace.categories import PAGEABLE_HTOD

#: Where the steps that lengthen give back more than this share of what the steps that
#: gain save, the saving moves rather than holds: the cards say so (AMP on an input-bound
#: step: +499, +907 and -1,406 µs; each step done sooner only waits longer for the next
#: batch).
MOVED_SHARE = 0.25

#: µs per warm step under which what the lengthened steps give back is the replay's noise
#: (a replayed step a few µs longer), not a saving that moves.
MOVED_NOISE_US = 5.0


def step_savings(before_us: np.ndarray, after_us: np.ndarray,
                 windows: Iterable[int] | None = None) -> np.ndarray:
    """Each of ``windows``' (all when None) saving, before minus after, signed: a step the
    change lengthens (the time another step saved, waited here) counts against the rest."""
    diff = np.asarray(before_us, dtype=float) - np.asarray(after_us, dtype=float)
    return diff if windows is None else diff[_index(windows)]


def _sorted_once(ix: np.ndarray) -> np.ndarray:
    """The windows sorted, each once (what ``sorted(set(...))`` gave, as an array); as
    they are where they already are (the warm windows: no sort of a million)."""
    if ix.shape[0] < 2 or bool(np.all(ix[1:] > ix[:-1])):
        return ix
    return sorted_sets.unique(ix)


def _index(windows: Iterable[int]) -> np.ndarray:
    """Window indices as an int64 array (an array as it is: a million warm windows' list
    was a conversion per int)."""
    if isinstance(windows, np.ndarray):
        return windows.astype(np.int64, copy=False)
    return np.fromiter(windows, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Saving:
    """What the windows save together, the one statistic of cards, parts and findings.
    Equal to another where its figures and its windows are (the index compared as the
    windows, not element by element)."""

    #: The windows' savings added up, never below zero: ``saves_us_total``.
    total_us: float
    #: The savings of the windows that gain, added up (at least ``total_us``).
    gains_us: float
    #: The windows, in order (window indices, int64): an array, the card reads their
    #: number (a tuple of a million ints was 30 ms and 36 MB a card).
    index: np.ndarray
    #: The window whose own saving is nearest the per-step one (the earlier on a tie):
    #: the step the cards draw. None for no window.
    shown: int | None

    @property
    def windows(self) -> tuple[int, ...]:
        """The windows, in order, as a tuple of ints (made when read)."""
        return tuple(self.index.tolist())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Saving):
            return NotImplemented
        return ((self.total_us, self.gains_us, self.shown)
                == (other.total_us, other.gains_us, other.shown)
                and bool(np.array_equal(self.index, other.index)))

    def __hash__(self) -> int:
        return hash((self.total_us, self.gains_us, self.windows, self.shown))

    @property
    def per_step_us(self) -> float:
        """``saves_us``: the total over the windows' number (0 for no window)."""
        n = len(self.index)
        return self.total_us / n if n else 0.0

    @property
    def moves_us(self) -> float:
        """What the gaining windows save that other windows give back (at least 0)."""
        return max(self.gains_us - self.total_us, 0.0)

    @property
    def moves(self) -> bool:
        """Whether the saving moves into other steps rather than holds over the span:
        what they give back is above the noise and :data:`MOVED_SHARE` of the gains."""
        moved = self.moves_us
        return (moved > MOVED_SHARE * self.gains_us
                and moved > MOVED_NOISE_US * max(len(self.index), 1))


def saving_over(before_us: np.ndarray, after_us: np.ndarray,
                windows: Iterable[int] | None = None) -> Saving:
    """What ``windows`` (all when None) save: every card, part and finding gives its
    ``per_step_us`` (``saves_us``) and ``total_us`` (``saves_us_total``). Per-step savings
    are not clipped before they are added: a step that finishes sooner only to wait longer
    in the next saves the span nothing."""
    before = np.asarray(before_us, dtype=float)
    ks = np.arange(before.shape[0]) if windows is None else _sorted_once(_index(windows))
    saved = step_savings(before, after_us, ks)
    if not saved.size:
        return Saving(0.0, 0.0, np.zeros(0, dtype=np.int64), None)
    total = max(float(saved.sum()), 0.0)
    dist = np.abs(saved - total / saved.size)
    # The first window within a picosecond of the nearest: float sums break no tie.
    shown = int(ks[int(np.flatnonzero(dist <= dist.min() + 1e-6)[0])])
    return Saving(total_us=total, gains_us=float(saved[saved > 0].sum()),
                  index=ks.astype(np.int64, copy=False), shown=shown)


def warm_windows(analysis: SpanAnalysis) -> list[int]:
    """The windows a card's figures speak for: those the engine did not call cold
    (``views.warmth``, the steps' ``cold`` field) nor a trailing stub; every one but the
    stub where every one is cold."""
    return warm_index(analysis).tolist()


@computed
def warm_index(analysis: SpanAnalysis) -> np.ndarray:
    """:func:`warm_windows` as an int64 array, once: every card's change and saving reads
    it (a million steps: a list of them per read was 20-40 ms)."""
    n = len(analysis.windows)
    if not len(analysis.host_steps):
        warm = np.arange(n, dtype=np.int64)
    else:
        warm = np.flatnonzero(step_walls(analysis).judged).astype(np.int64, copy=False)
    warm.flags.writeable = False  # a memo every card shares
    return warm


def part_windows(analysis: SpanAnalysis, steps: Sequence[int | None] | None) -> list[int]:
    """The windows a finding's figure speaks for: the warm windows among its ``steps``;
    its steps' windows where none is warm; the card's (all warm windows) where ``steps``
    is None or names no window."""
    warm = warm_windows(analysis)
    if steps is None:
        return warm
    # The windows whose step is one of ``steps``, read off the step column (a window's
    # step is None on a span without steps).
    c = analysis.windows.columns
    wanted = set(steps)
    picked = np.zeros(0, dtype=np.int64)
    if c.has_steps:
        numbers = np.sort(np.asarray([s for s in wanted if s is not None]))
        if numbers.size:
            at = np.minimum(np.searchsorted(numbers, c.step), numbers.size - 1)
            picked = np.flatnonzero(numbers[at] == c.step)
    elif None in wanted:
        picked = np.arange(len(c))
    if not picked.size:
        return warm
    is_warm = np.zeros(len(c), dtype=bool)
    is_warm[warm] = True
    in_warm = picked[is_warm[picked]]
    return (in_warm if in_warm.size else picked).tolist()


@dataclass(frozen=True)
class Projection:
    id: str
    change: str  # one sentence
    #: The rules whose change is this card's (``claims``) or part of it (``parts``).
    rules: tuple[str, ...]
    assumes: str
    before_us: np.ndarray  # per window
    after_us: np.ndarray
    #: The rules whose findings' changes are parts of this one (one sync site each).
    part_rules: tuple[str, ...] = ()
    #: Rules that name the problem this change fixes, without a change of their own.
    related: tuple[str, ...] = ()
    #: The change replayed: what the steps' critical paths lose (``views.whatif_path``).
    applied: Change | None = None

    def saving_over(self, windows: Iterable[int] | None = None) -> Saving:
        """What ``windows`` (all when None) save together (:func:`saving_over`)."""
        return saving_over(self.before_us, self.after_us, windows)

    def saving(self, windows: Iterable[int] | None = None) -> float:
        """The saving per step over ``windows`` (all when None): their total over their
        number."""
        return self.saving_over(windows).per_step_us

    def step_savings(self, windows: Iterable[int] | None = None) -> np.ndarray:
        """Each of ``windows``' (all when None) own saving, signed."""
        return step_savings(self.before_us, self.after_us, windows)

    def total_saving(self, windows: Iterable[int] | None = None) -> float:
        """The steps' savings added up, never below zero: the time the span saves."""
        return self.saving_over(windows).total_us


def pageable_htod_calls(analysis: SpanAnalysis) -> np.ndarray:
    """The calls that launched host→device copies from pageable memory (they block
    while the driver stages the data: ``pageable-memcpy``)."""
    m = analysis.model
    acts = m.device_activity_rows
    copies = acts[np.isin(m.name[acts], m.name_ids_matching(PAGEABLE_HTOD))]
    launchers = m.launcher[copies]
    return sorted_sets.unique(launchers[launchers >= 0])


def _user_syncs(analysis: SpanAnalysis) -> Change | None:
    """Every blocking call of the user's program: the syncs (the profiler's flush
    left out) no longer wait, and copies from pageable memory are made from pinned."""
    art = profiler_artefacts(analysis)
    rows = analysis.model.without(analysis.sync_rows, art.flush_syncs)
    changes = [c for c in (sync_change(analysis, rows),
                           pinned_change(analysis, pageable_htod_calls(analysis)))
               if c is not None]
    if not changes:
        return None
    return changes[0] if len(changes) == 1 else combine(changes)


def _host_work(analysis: SpanAnalysis) -> Change | None:
    """The host's own code (``views.host_work``: stretches that start no op or runtime
    call while the device idles) gone from the threads that feed the device."""
    from tb_diagnostics.analysis.views.host_work import host_work

    if analysis.cpu_only:  # the CPU is the device: its code is the work
        return None
    # Not the time an earlier cause names (a DataLoader call's own work is `input`'s).
    movable = host_work(analysis).movable_by_lane
    return Change(removed_host=movable) if movable else None


#: What the ``host-work`` card assumes.
HOST_WORK_ASSUMES = ("the host's own code that launches no device work (a stretch of 1 ms "
                     "or more on a thread that feeds the device, with no op or runtime call "
                     "started, while the device idles: views.host_work) runs elsewhere, in "
                     "DataLoader workers or ahead of time, and its results are ready when "
                     "the step needs them; what a DataLoader call, a sync or a collective "
                     "holds is the input, syncs and collectives' own; everything else runs "
                     "as recorded")


@dataclass(frozen=True)
class Card:
    id: str
    sentence: str  # the change in a sentence
    #: Rules whose finding proposes this very change: their saving is the card's number.
    claims: tuple[str, ...]
    #: Rules whose findings each propose a part of it: their savings are its parts.
    parts: tuple[str, ...]
    #: Rules that name the problem it fixes but replay no change of their own.
    related: tuple[str, ...]
    build: Callable[[SpanAnalysis], Change | None]
    assumes: str


#: The rules whose fix reads "torch.compile the step".
_COMPILE_RULES = ("tiny-kernels", "high-call-count", "memory-bound-chain", "dispatch-chain")

CARDS: list[Card] = [
    Card("input", "Worker processes load the batches: the training thread waits only for "
         "each batch's hand-off.",
         ("dataloader-bottleneck",), (), ("gpu-idle-gap",), input_change, ASSUMES["input"]),
    Card("host-work", "The host's own code that launches no device work (preprocessing, "
         "decoding, logging) runs off the thread that feeds the device.",
         ("host-work-stall",), (), (), _host_work, HOST_WORK_ASSUMES),
    Card("syncs", "The host no longer blocks in syncs (item(), synchronize(), pageable copies).",
         (), ("host-sync", "pageable-memcpy"), (), _user_syncs,
         ASSUMES["syncs"] + "; copies from pageable memory are made from pinned memory (the "
         "call returns in 5 µs)"),
    Card("profiler", "The profiler's own host time and flush sync are gone.",
         (), (), ("profiler-flush-sync", "profiler-buffer-request"), profiler_change,
         ASSUMES["profiler"]),
    Card("launch", "Each launch costs the host 5 µs, no more (less Python and dispatch per op).",
         (), (), ("tiny-kernels", "launch-delay", "high-call-count"), launch_change,
         ASSUMES["launch"]),
    Card("graphs", "The step's launches are replayed as CUDA graphs.",
         ("tiny-kernels",), (), ("high-call-count",), graphs_change, ASSUMES["graphs"]),
    # torch.compile, the fix the overhead and fusion rules propose: related, not claimed
    # (each of those rules names one symptom; the card replays the whole compile).
    Card("compile", "The step runs under torch.compile: one graph per region between graph "
         "breaks, fused kernels, no eager dispatch.", (), (), _COMPILE_RULES, compile_change,
         COMPILE_ASSUMES["compile"]),
    Card("compile-graphs", "The step runs under torch.compile(mode=\"reduce-overhead\"): "
         "each compiled region replayed as one CUDA graph.", (), (), _COMPILE_RULES,
         compile_graphs_change, COMPILE_ASSUMES["compile-graphs"]),
    Card("fusion", "Each chain of memory-bound kernels runs as one fused kernel.",
         ("memory-bound-chain",), (), (), fusion_change, ASSUMES["fusion"]),
    Card("amp", "fp32 GEMMs and convolutions run in bf16 (fp16 where there is no bf16).",
         ("fp32-matmul",), (), (), amp_change, ASSUMES["amp"]),
]


def warm_change(analysis: SpanAnalysis, change: Change) -> Change:
    """``change`` acting on the warm windows only (:mod:`..replay.restrict`): a saving is
    read off them, and a cold step's removed wait must not spill into them."""
    return within_windows(analysis, change, warm_index(analysis))


def replayed(analysis: SpanAnalysis, change: Change) -> tuple[np.ndarray, np.ndarray]:
    """(walls before, walls after) of every window, the change replayed on the warm
    ones."""
    before = analysis.windows.columns.wall_us  # the column, not a view per window
    return before, replay_wall_us(analysis, warm_change(analysis, change))


@computed
def card_changes(analysis: SpanAnalysis) -> list[tuple[Card, Change]]:
    """Each card that applies to the span and its change on the warm windows, built before
    any is replayed: the views the builders read (the capture and compile regions, the
    roofline) are then no longer needed by the replays (``report.lifetimes``)."""
    out = []
    for card in CARDS:
        change = card.build(analysis)
        if change is not None:
            out.append((card, warm_change(analysis, change)))
    return out


@computed
def projections(analysis: SpanAnalysis) -> list[Projection]:
    """One projection per change that applies to the span, then ``all`` of them."""
    out, changes = [], []
    # Each distinct change replayed once: a card whose change is an earlier card's, bit for
    # bit (engine.same_change), takes that one's walls and Change (the report reads the
    # same after_us and applied objects: packed and cut once).
    done: list[tuple[Change, tuple[np.ndarray, np.ndarray]]] = []
    for card, change in card_changes(analysis):
        changes.append(change)
        earlier = next((d for d in done if same_change(d[0], change)), None)
        if earlier is None:
            earlier = (change, replayed(analysis, change))
            done.append(earlier)
        applied, walls = earlier
        out.append(Projection(card.id, card.sentence, card.claims + card.parts, card.assumes,
                              *walls, part_rules=card.parts, related=card.related,
                              applied=applied))
    del done
    if len(changes) > 1:
        # No rule proposes every change at once: `all` claims no finding's number.
        every = combine(changes)
        out.append(Projection(
            "all", "Every change above at once (savings do not add up: the changes overlap "
            "and the device work they leave still takes its time).",
            (), "all of the above", *replayed(analysis, every), applied=every))
    return out


def projection(analysis: SpanAnalysis, change_id: str) -> Projection | None:
    return next((p for p in projections(analysis) if p.id == change_id), None)
