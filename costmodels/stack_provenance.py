"""Where a stack's fitted numbers come from: the rows, the script, the date, the error on the fitting
rows and the held-out error per regime (benchmarks/accuracy.py), which costmodels.uncertainty reads."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from costmodels.stack_fitted import MAX_REL_ERROR


class RegimeError(BaseModel):
    """Held-out relative error of step time in one regime (benchmarks/accuracy.py)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    rows: int = Field(..., ge=0, le=1_000_000, description="Held-out published runs behind the numbers, each "
                      "counted once.")
    samples: Optional[int] = Field(
        None, ge=0, le=10_000_000, description="Out-of-sample errors behind the quantiles: a run predicted by the "
        "shipped profiles and again by leave-one-regime-out refits counts once per prediction; null = rows.")
    seq_max: Optional[int] = Field(
        None, ge=1, le=100_000_000, description="The longest sequence (tokens) among the runs: an estimate at a "
        "longer one is extrapolated (costmodels.uncertainty); null = not recorded.")
    comm_max: Optional[float] = Field(
        None, ge=0, le=1, description="The largest share of a step that exposed communication takes among the runs, "
        "as predicted: an estimate whose share is larger by more than costmodels.uncertainty.COMM_REACH is "
        "extrapolated; null = not recorded.")
    mean: float = Field(..., ge=0, le=MAX_REL_ERROR, description="Mean |predicted/measured - 1|.")
    p50: float = Field(..., ge=0, le=MAX_REL_ERROR, description="Median |relative error|.")
    p90: float = Field(..., ge=0, le=MAX_REL_ERROR, description="90th percentile |relative error|.")
    bias: float = Field(
        ..., ge=-MAX_REL_ERROR, le=MAX_REL_ERROR,
        description="Median signed error (negative: predicted faster than measured).")



class Provenance(BaseModel):
    """How the stack's fitted numbers were obtained and how wrong they are."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    fitted_by: str = Field("", description="The script that wrote the fitted numbers (e.g. benchmarks/calibrate.py, "
                           "parplan calibrate); empty = set by hand.")
    fitted_date: Optional[str] = Field(None, pattern=r"^\d{4}-\d{2}-\d{2}$", description="UTC date (YYYY-MM-DD) the "
                                       "fitted numbers were last written; null = unknown.")
    fitted_on: str = Field("not fitted", description="Which rows fitted these numbers, and how.")
    fit_rows: list[str] = Field(default_factory=list, description="Ids of the measured rows the fit used.")
    fit_error: Optional[float] = Field(
        None, ge=0, le=MAX_REL_ERROR,
        description="Mean |relative error| on the fitting rows.")
    held_out: dict[str, RegimeError] = Field(
        default_factory=dict, description="Held-out error per regime 'sharding/scale' ('*' = any), written by "
        "benchmarks/accuracy.py; costmodels.uncertainty reads it.")
