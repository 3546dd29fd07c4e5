"""Results of ``verify.attention``: one line per case and check, and the report over them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelcheck._src.core.outcome import Outcome
from kernelcheck._src.core.results import Result
from kernelcheck._src.core.rounding import Tolerance
from kernelcheck._src.verify.attention.cases import FIXED_D

__all__ = ["AttentionCase", "AttentionReport"]


@dataclass(frozen=True, repr=False)
class AttentionCase(Result):
    """One input (or one extra check) and how ``fn`` did on it.

    Attributes
    ----------
    name : str
        The case (one of ``CASES``, ``"user inputs"``), or the check:
        ``"causality"``, ``"gradient dQ"``, ``"state hand-over"``, ...
    shape : tuple of int
        Shape of ``Q`` (internal ``(..., n, d)`` layout).
    passed : bool or None
        None when the case was skipped (``note`` says why).
    max_error : float
        The largest ``|fn - reference|`` (``inf`` for a non-finite or misshapen output).
    max_error_at : tuple of int or None
        Where it is.
    ratio : float
        The largest ``|fn - reference| / tolerance`` over the entries.
    error : float
        ``|fn - reference|`` at ``where``.
    where : tuple of int or None
        Index of the entry with the largest ratio.
    tolerance : float
        The tolerance at ``where``.
    note : str
        Why the case failed or was skipped, else empty.
    detectable : float
        The smallest relative error of one entry this case detects
        (``min tolerance / |reference|``): a layer off by more at that entry fails.
    diagnosis : str
        For a failing case, the known bug shape the output matches (or "").
    """

    name: str
    shape: tuple
    passed: bool | None
    max_error: float
    ratio: float
    error: float
    where: tuple | None
    tolerance: float
    note: str = ""
    max_error_at: tuple | None = None
    detectable: float = math.nan
    diagnosis: str = ""

    def _text(self) -> str:
        if self.passed is None:
            return f"{self.name}: skipped ({self.note})"
        text = f"{self.name} {self.shape}: largest error {self.max_error:.3g}"
        if self.max_error_at is not None:
            text += f" at {self.max_error_at}"
        if self.where is not None:
            text += (
                f"; worst error/tolerance {self.ratio:.3g} at {self.where} "
                f"(error {self.error:.3g}, tolerance {self.tolerance:.3g})"
            )
        if math.isfinite(self.detectable):
            text += f"; detects relative errors from {self.detectable:.2g}"
        if self.note:
            text += f"; {self.note}"
        if self.diagnosis:
            text += f"; diagnosis: {self.diagnosis}"
        return text

    def first_failure(self) -> str:
        """Where this case fails: the entry, its error against its tolerance, the note.

        Returns
        -------
        str
            Empty unless the case failed.
        """
        if self.passed is not False:
            return ""
        text = f"case '{self.name}' (Q of shape {self.shape})"
        if self.where is not None and math.isfinite(self.error):
            token = ""
            if len(self.where) >= 2 and len(self.shape) >= 2:
                token = f" (token {self.where[-2]} of {self.shape[-2]})"
            text += (
                f" at output index {self.where}{token}: |fn - reference| = {self.error:.3g} > "
                f"tolerance {self.tolerance:.3g} ({self.ratio:.3g}x)"
            )
        if self.note:
            text += f": {self.note}"
        if self.diagnosis:
            text += f"; diagnosis: {self.diagnosis}"
        return text


def failed_case(name: str, shape: tuple, note: str) -> AttentionCase:
    """A case the user's function failed outright (raised, or returned unusable output)."""
    return AttentionCase(name, shape, False, math.inf, math.inf, math.inf, None, math.nan, note)


def skipped_case(name: str, shape: tuple, note: str) -> AttentionCase:
    """A case left unjudged (it cannot apply, or the reference is undefined there)."""
    return AttentionCase(name, shape, None, math.nan, math.nan, math.nan, None, math.nan, note)


@dataclass(frozen=True, repr=False)
class AttentionReport(Result):
    """Report of :func:`attention`: does ``fn`` match the reference form?

    Attributes
    ----------
    passed : bool
        Every judged case and check within tolerance, and at least one case judged.
    reference : str
        The reference in words, e.g. ``"softmax attention (scale 1/sqrt(d))"``.
    causal : bool
    worst_case : str or None
        Name of the case or check with the largest error/tolerance ratio.
    worst_error : float
        ``|fn - reference|`` at the worst entry (largest ratio) of the worst case.
    where : tuple of int or None
        Index (into the output) of that entry.
    tolerance : Tolerance
        The tolerance at that entry and the error model it came from.
    cases : tuple of AttentionCase
        The forward cases.
    seed : int or None
    largest_error : float
        The largest ``|fn - reference|`` over every case (it may lie where the
        tolerance is large too).
    largest_error_case : str or None
        The case it is in.
    checks : tuple of AttentionCase
        The extra checks: causality by perturbation, gradients, state hand-over.
    framework : str
        ``"numpy"``, ``"torch"`` or ``"jax"``.
    precision : str
        The rounding model the layer was judged with, in words.
    notes : tuple of str
        What else the reader should know (a declared precision that differs
        from the output's, a stabiliser, skipped checks).
    not_checked : tuple of str
        The checks the call asked for (gradients, state) that could not be
        judged, each with the reason; while any is listed the report does not
        pass (its outcome is inconclusive unless something failed).
    """

    passed: bool
    reference: str
    causal: bool
    worst_case: str | None
    worst_error: float
    where: tuple | None
    tolerance: Tolerance
    cases: tuple
    seed: int | None
    largest_error: float = math.nan
    largest_error_case: str | None = None
    checks: tuple = ()
    framework: str = "numpy"
    precision: str = ""
    notes: tuple = ()
    not_checked: tuple = ()

    @property
    def outcome(self) -> Outcome:
        """Verified when every judged case passed, refuted when one failed, else inconclusive."""
        if self.failures():
            return Outcome.REFUTED
        return Outcome.VERIFIED if self.passed else Outcome.INCONCLUSIVE

    def failures(self) -> tuple:
        """The cases and checks that failed."""
        return tuple(c for c in (*self.cases, *self.checks) if c.passed is False)

    def skipped(self) -> tuple:
        """The cases and checks that could not be judged."""
        return tuple(c for c in (*self.cases, *self.checks) if c.passed is None)

    def _text(self) -> str:
        kind = "causal" if self.causal else "bidirectional"
        judged = sum(c.passed is not None for c in self.cases)
        text = f"fn vs {self.reference} ({kind}) on {judged} cases"
        if self.checks:
            text += f" and {sum(c.passed is not None for c in self.checks)} checks"
        if self.worst_case is not None and self.where is not None:
            text += (
                f"; worst error {self.worst_error:.3g} in case '{self.worst_case}' at "
                f"{self.where}, tolerance {self.tolerance.value:.3g}"
            )
            if self.largest_error_case is not None and self.largest_error > self.worst_error:
                text += f"; largest error {self.largest_error:.3g} in '{self.largest_error_case}'"
        elif self.worst_case is not None:  # fn gave no output to compare entrywise
            text += f"; case '{self.worst_case}' has no output to compare"
        failed = self.failures()
        if failed:
            text += "; failing: " + ", ".join(f"'{c.name}'" for c in failed)
            notes = [c.note for c in failed if c.note]
            if notes:
                text += f" ({notes[0]})"
            diagnoses = [c.diagnosis for c in failed if c.diagnosis]
            if diagnoses:
                text += f"; diagnosis: {diagnoses[0]}"
        if self.not_checked:
            text += "; not checked: " + "; ".join(self.not_checked)
        unjudged = [
            c.name for c in self.cases if c.passed is None and not c.note.startswith(FIXED_D)
        ]
        if unjudged and judged:
            text += "; cases not judged: " + ", ".join(f"'{name}'" for name in unjudged)
        if judged == 0:
            text += "; no case could be judged"
        return text

    def first_failure(self) -> str:
        """The first failing case or check, where and by how much ("" when none failed).

        Returns
        -------
        str
        """
        failed = self.failures()
        return failed[0].first_failure() if failed else ""

    def advice(self) -> str:
        """For a run that judged nothing: why the cases were skipped; else empty."""
        if self.outcome is not Outcome.INCONCLUSIVE:
            return ""
        notes = sorted({c.note for c in self.skipped() if c.note})
        why = f" (skipped: {notes[0]})" if notes else ""
        return f"no case could be judged{why}: give inputs the reference is defined on"

    def details(self) -> str:
        """One line per case and check, then the notes."""
        lines = [str(c) for c in (*self.cases, *self.checks)]
        if self.precision:
            lines.append(f"precision: {self.precision}")
        lines += list(self.notes)
        return "\n".join(lines)
