"""Scaling results: one :class:`FormScaling` per form inside a :class:`ScalingReport`.

A form's verdict is its time fit judged against the accepted range of
:func:`~kernelcheck._src.scaling.judge.accepted_range` (``pass``, ``fail``,
``inconclusive``), or ``not judged`` with the reason when the sizes or the
rounds cannot support a verdict; ``not judged`` is inconclusive, never
refuted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kernelcheck._src.core.outcome import Outcome, exit_code
from kernelcheck._src.core.results import Result
from kernelcheck._src.scaling.fit import ExponentFit, verdict_outcome
from kernelcheck._src.scaling.measure import Measurement, plot_measurements

__all__ = ["FormScaling", "ScalingReport", "TITLE"]

#: Title of the plot of a :class:`ScalingReport`.
TITLE = "softmax against linear attention"


@dataclass(frozen=True, eq=False, repr=False)
class FormScaling(Result):
    """One attention form's measurement, fits and verdict inside a :class:`ScalingReport`.

    Attributes
    ----------
    name : str
        Display name, e.g. ``"softmax, causal"``.
    form : str
        The attention form (``"softmax"``, ``"parallel"``, ``"chunked"``, ...).
    causal : bool
        Whether the form is causal.
    claim : str
        ``"C2"`` (quadratic), ``"C3"`` (linear) or ``"C20"`` (gated, linear).
    kind : str
        ``"quadratic"`` or ``"linear"``: the exponent of its operation count.
    measurement : Measurement
        Times, memory and model flops per size.
    time_fit : ExponentFit
        Exponent of time (the median of the per-round slopes), judged
        against the accepted range when the sizes support a verdict.
    accepted : tuple of float or None
        The accepted range of the time exponent (None when not judged).
    accepted_reason : str
        Where the range comes from, or why there is none.
    cost_spread : float
        Largest over smallest time per modelled operation across the sizes
        (the quantity the accepted range bounds).
    memory_fit : ExponentFit or None
        Exponent of peak memory (not judged).
    model_exponent : float or None
        Exponent of the cost model's flops over the same sizes.
    state_size : tuple of int or None
        The cost model's state size at each size (claim C11 for the
        recurrent and chunked forms).
    verdict : str
        ``"pass"``, ``"fail"``, ``"inconclusive"`` or ``"not judged"``.
    passed : bool
    """

    name: str
    form: str
    causal: bool
    claim: str
    kind: str
    measurement: Measurement
    time_fit: ExponentFit
    accepted: tuple[float, float] | None
    accepted_reason: str
    cost_spread: float
    memory_fit: ExponentFit | None
    model_exponent: float | None
    state_size: tuple[int, ...] | None
    verdict: str
    passed: bool

    @property
    def outcome(self) -> Outcome:
        """``pass`` verified, ``fail`` refuted; ``inconclusive`` and ``not judged`` inconclusive."""
        return verdict_outcome(self.verdict)

    @property
    def reason(self) -> str:
        """Why the form is not judged (empty when it is)."""
        if self.verdict != "not judged":
            return ""
        reasons = [] if self.accepted is not None else [self.accepted_reason]
        return "; ".join(reasons + ([self.time_fit.reason] if self.time_fit.reason else []))

    def __str__(self) -> str:
        t = self.time_fit
        text = (
            f"{self.name} ({self.claim}): time exponent {t.slope:.3f} [{t.low:.3f}, {t.high:.3f}]"
        )
        if self.accepted is not None:
            text += f", accepted [{self.accepted[0]:.3f}, {self.accepted[1]:.3f}]"
        text += f": {self.verdict}"
        return text + (f" ({self.reason})" if self.reason else "")


def _fmt_range(r: tuple[float, float] | None) -> str:
    return "-" if r is None else f"[{r[0]:.2f}, {r[1]:.2f}]"


@dataclass(frozen=True, eq=False, repr=False)
class ScalingReport(Result):
    """Measured exponents of softmax and linear attention (claims C2, C3, C11).

    Attributes
    ----------
    forms : tuple of FormScaling
    sizes : dict
        The sizes of each kind measured, ``{"quadratic": (...), "linear": (...)}``.
    d, D, d_v, chunk_size : int
        Head dimension, feature dimension, value dimension, chunk size.
    feature_map : str
        The feature map of the linear forms.
    repeats : int
        Timed rounds (each round times every size once, in a random order).
    statistic : str
        The per-size statistic shown in the tables.
    confidence : float
    quick : bool
    environment : dict
        Python, NumPy, machine, CPU count and load of the run.
    seconds : float
        Wall time of the whole run.
    plot_path : str or None
        Where the plot was written, if anywhere.
    passed : bool
        Every form's verdict is ``"pass"``.
    notes : tuple of str
        How the run was made and judged, in sentences.
    """

    forms: tuple[FormScaling, ...]
    sizes: dict
    d: int
    D: int
    d_v: int
    chunk_size: int
    feature_map: str
    repeats: int
    statistic: str
    confidence: float
    quick: bool
    environment: dict
    seconds: float
    plot_path: str | None
    passed: bool
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def outcome(self) -> Outcome:
        """Refuted when a form's fit fails, verified when all pass, else inconclusive."""
        return {0: Outcome.VERIFIED, 1: Outcome.REFUTED}.get(
            exit_code(self.forms, name="forms"), Outcome.INCONCLUSIVE
        )

    def __str__(self) -> str:
        head = {Outcome.VERIFIED: "verified", Outcome.REFUTED: "refuted"}.get(
            self.outcome, "inconclusive"
        )
        parts = "; ".join(f"{f.name} p={f.time_fit.slope:.2f} {f.verdict}" for f in self.forms)
        return f"scaling {head}: {parts}"

    def summary_table(self) -> str:
        """The one-row-per-form Markdown table of exponents, accepted ranges and verdicts."""
        conf = f"{self.confidence:.0%}"
        lines = [
            f"| form | claim | n | time exponent [{conf} CI] | accepted | verdict "
            "| time/op spread | memory exponent | cost-model exponent |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for f in self.forms:
            t = f.time_fit
            mem = "-" if f.memory_fit is None else f"{f.memory_fit.slope:.2f}"
            model = "-" if f.model_exponent is None else f"{f.model_exponent:.2f}"
            n = f.measurement.sizes
            lines.append(
                f"| {f.name} | {f.claim} | {n[0]}..{n[-1]} | {t.slope:.3f} "
                f"[{t.low:.3f}, {t.high:.3f}] | {_fmt_range(f.accepted)} | {f.verdict} | "
                f"{f.cost_spread:.2f} | {mem} | {model} |"
            )
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        """Summary table, settings, then one per-size table per form."""
        env = self.environment
        sizes = "; ".join(
            f"{kind}: n = {', '.join(str(n) for n in ns)}" for kind, ns in self.sizes.items()
        )
        out = [
            "## Scaling: softmax against linear attention (C2, C3, C11)",
            "",
            f"{sizes}; d = {self.d}, d_v = {self.d_v}, D = {self.D} ({self.feature_map}), "
            f"chunk size {self.chunk_size}; {self.repeats} rounds; "
            f"{env.get('cpu_count')} CPUs, NumPy {env.get('numpy')}, Python {env.get('python')}; "
            f"run took {self.seconds:.1f} s.",
            "",
            self.summary_table(),
        ]
        for note in self.notes:
            out.append(f"- {note}")
        for f in self.forms:
            if f.reason:
                out.append(f"- {f.name}: {f.reason}")
        out.append("")
        for f in self.forms:
            out.append(f.measurement.to_markdown())
            if f.state_size is not None:
                sizes_text = ", ".join(str(s) for s in f.state_size)
                out.append(f"- state size per n (cost model): {sizes_text}\n")
        if self.plot_path:
            out.append(f"![scaling plot]({Path(self.plot_path).name})\n")
        return "\n".join(out)

    def plot(self, path) -> Path:
        """Write the log-log plot of every form (time, memory, model throughput).

        Parameters
        ----------
        path : str or pathlib.Path
            Where the image is written.
        """
        return plot_measurements([f.measurement for f in self.forms], path, title=TITLE)


def cost_spread(m: Measurement) -> float:
    """Largest over smallest measured time per modelled operation (1 without a model)."""
    thr = m.throughput()
    if thr is None:
        return 1.0
    return float(np.max(thr) / np.min(thr))
