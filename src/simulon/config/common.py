"""Shared config pieces: the strict base model, data types and field-located errors."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Strict


class StrictModel(BaseModel):
    """Every config block: unknown keys are errors, values are not coerced from the wrong type
    (`tp: yes` or `num_channels: "2"` are refused, not read as 1 and 2)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)


class DType(StrEnum):
    fp32 = "fp32"
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"
    fp8 = "fp8"
    fp4 = "fp4"

    @property
    def bytes(self) -> float:
        return _DTYPE_BYTES[self]


LaxDType = Annotated[DType, Strict(False)]
"""A data type written as its name in YAML (strict mode would demand an enum instance)."""

_DTYPE_BYTES = {
    DType.fp32: 4.0, DType.tf32: 4.0, DType.fp16: 2.0, DType.bf16: 2.0, DType.fp8: 1.0, DType.fp4: 0.5,
}


class FieldError(ValueError):
    """A consistency problem located at a dotted field path below the block that raised it."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
